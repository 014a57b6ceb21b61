"""Installing the server the way users do, in the real editors, with nothing named specfill on
PATH: Neovim's install({ sync = true }) and the VS Code extension's offer. pip may take
llama.cpp from the wheel `make install` built (PIP_FIND_LINKS), so it is not built twice; the
code path is the users'. Each failure that can be made here (no Python, a registry that answers
nothing, a full disk, a cancelled install) is said in words, and the next install succeeds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pynvim
import pytest

from tests.editor_sample import SOURCE
from tests.nvim_helpers import PLUGIN, nvim_binary, press, wait_for, wait_ready
from tests.remote_helpers import Silent
from tests.shared_helpers import kill_shared_servers

pytestmark = pytest.mark.install
ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".wheels" / "llamafile-off"  # built by `make install`


def clean_path(tmp_path: Path) -> str:
    """PATH without this checkout's venv (no `specfill`), with the Pythons the machine has."""
    dirs = [d for d in os.environ["PATH"].split(os.pathsep)
            if d and not (Path(d) / "specfill").exists() and Path(d).resolve() != Path(sys.executable).parent]
    bin_dir = tmp_path / "bin"  # nvim itself, without the rest of the venv
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nvim").unlink(missing_ok=True)
    (bin_dir / "nvim").symlink_to(nvim_binary())
    return os.pathsep.join([str(bin_dir), *dirs])


def user_env(tmp_path: Path, **extra) -> dict:
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)  # the shared server the plugin starts is this test's
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_RUNTIME_DIR": str(tmp_path / "run"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": clean_path(tmp_path),
           "PIP_FIND_LINKS": " ".join(filter(None, [os.environ.get("PIP_FIND_LINKS"), str(WHEELS)]))}
    env.pop("VIRTUAL_ENV", None)
    return {**env, **extra}


def headless_install(env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["nvim", "--headless", "--clean", "--cmd", f"set rtp^={PLUGIN}", "-c",
                           "lua require('specfill').install({ sync = true })", "-c", "qa!"],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


def embedded_nvim(env: dict) -> pynvim.Nvim:
    """A Neovim over pynvim in the user's environment `env` (fresh XDG folders, a clean PATH)."""
    changed = [f"{k}={v}" for k, v in env.items() if os.environ.get(k) != v]
    return pynvim.attach("child", argv=["env", *changed, "nvim", "--clean", "--embed", "--headless", "--cmd",
                                        f"set rtp^={PLUGIN}", "--cmd", "set noswapfile"])


def installed(env: dict) -> dict | None:
    marker = Path(env["XDG_DATA_HOME"]) / "nvim" / "specfill" / "installed.json"
    return json.loads(marker.read_text()) if marker.exists() else None


def assert_installs(env: dict) -> dict:
    run = headless_install(env)
    assert run.returncode == 0, run.stdout + run.stderr
    info = installed(env)
    assert info and Path(info["server"]).exists() and info["version"]
    return info


def test_neovim_installs_the_server_and_then_shows_ghost_text(tmp_path):
    env = user_env(tmp_path)
    t0 = time.monotonic()
    info = assert_installs(env)
    print(f"install with the built llama.cpp wheel: {time.monotonic() - t0:.0f} s")
    assert info["build"] == "llamafile-off" and info["batch_invariant"]
    path = tmp_path / "shapes.py"
    path.write_text(SOURCE)
    nvim = embedded_nvim(env)
    try:
        nvim.exec_lua("require('specfill').setup({})")  # no settings: the installed server
        nvim.command(f"edit {path}")
        nvim.command("setlocal noautoindent nosmartindent indentexpr=")
        stats = wait_ready(nvim)
        assert stats["model"].startswith(str(tmp_path / "data"))  # the model inside the installed server
        nvim.input("Go    return ")
        suggestion = press(nvim, "<Tab>")
        wait_for(nvim, "vim.api.nvim_get_current_line() ~= '    return '")
        assert nvim.current.buffer[-1] == "    return " + suggestion.split("\n")[0]
        nvim.command("checkhealth specfill")
        report = "\n".join(nvim.current.buffer[:])
        assert f"installed server {info['version']}" in report and "llamafile-off build" in report
    finally:
        nvim.close()
        kill_shared_servers(Path(env["XDG_RUNTIME_DIR"]))


def test_no_python_on_path_is_said_and_the_next_install_succeeds(tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "nvim").symlink_to(nvim_binary())
    run = headless_install(user_env(tmp_path, PATH=str(bare)))
    assert run.returncode == 1 and installed(user_env(tmp_path)) is None
    assert "needs Python 3.11 or newer to install its server, and none is on PATH" in run.stdout
    assert_installs(user_env(tmp_path))


def test_a_registry_that_answers_nothing_is_said_and_the_next_install_succeeds(tmp_path):
    silent = Silent()
    try:
        env = user_env(tmp_path, PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=silent.url + "/simple",
                       PIP_DEFAULT_TIMEOUT="2", PIP_RETRIES="0")
        run = headless_install(env)
    finally:
        silent.close()
    assert run.returncode == 1 and installed(env) is None
    assert f"the package index {silent.url}/simple did not answer" in run.stdout and "no answer in 2 s" in run.stdout
    assert "PIP_INDEX_URL" in run.stdout  # says where to look
    assert_installs(user_env(tmp_path))


def test_a_full_disk_is_said_and_the_next_install_succeeds(tmp_path):
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40M", "tmpfs", str(disk)], check=False,
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a small filesystem needs root")
    try:
        env = user_env(tmp_path, XDG_DATA_HOME=str(disk), SPECFILL_INSTALL_MIN_FREE_MB="1")
        run = headless_install(env)  # past the up-front check, pip meets the real ENOSPC
        assert run.returncode == 1 and installed(env) is None
        assert "no space left on device" in run.stdout and "free some space and install again" in run.stdout
        env = user_env(tmp_path, XDG_DATA_HOME=str(disk))
        run = headless_install(env)  # the up-front check
        assert run.returncode == 1 and "not enough disk space" in run.stdout and "MB free" in run.stdout
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
    assert_installs(user_env(tmp_path))


def test_a_cancelled_install_leaves_nothing_to_use_and_the_next_install_succeeds(tmp_path):
    env = user_env(tmp_path)
    nvim = embedded_nvim(env)
    try:
        nvim.exec_lua("_G.outcome = nil; require('specfill').install({ on_done = function(ok, r) "
                      "_G.outcome = { ok = ok, result = r } end })")
        venv = Path(env["XDG_DATA_HOME"]) / "nvim" / "specfill" / "venv"
        deadline = time.monotonic() + 60
        while not (venv / "bin" / "pip").exists():  # mid-way: the environment exists, pip is working
            assert time.monotonic() < deadline
            time.sleep(0.05)
        nvim.command("SpecfillInstall!")
        outcome = wait_for(nvim, "_G.outcome", 60)
        assert outcome["ok"] is False and "install cancelled; nothing was left installed" in outcome["result"]
        assert not venv.exists() and installed(env) is None
        assert nvim.exec_lua("return require('specfill').command()[1]") == "specfill"  # nothing to start
    finally:
        nvim.close()
    assert_installs(env)


@pytest.mark.editors
def test_vscode_offers_the_install_and_then_ghost_text_and_tab_work(tmp_path):
    from tests.vscode_helpers import CodeServer

    env = user_env(tmp_path)
    assert shutil.which("specfill", path=env["PATH"]) is None
    server = CodeServer(tmp_path / "vscode", {"specfill.completion.budgetMs": 30000}, env=env, server_path=False)
    try:
        folder = tmp_path / "project"
        folder.mkdir()
        path = folder / "shapes.py"
        path.write_text(SOURCE)
        server.start(folder)
        t0 = time.monotonic()
        result = server.drive(folder, "shapes.py", "    return ", tmp_path / "installed.png", timeout_ms=600000,
                              accept_install=True)
        assert result["ok"] and result.get("offered"), result
        print(f"offer accepted to ghost text: {time.monotonic() - t0:.0f} s")
        assert path.read_text().startswith(SOURCE + "    return ") and path.read_text() != SOURCE + "    return "
        marker = server.data / "User" / "globalStorage" / "specfill.specfill" / "server" / "installed.json"
        assert json.loads(marker.read_text())["version"] == json.loads(
            (ROOT / "editors" / "vscode" / "package.json").read_text())["version"]
    finally:
        server.stop()
