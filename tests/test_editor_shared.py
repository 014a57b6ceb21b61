"""Real editors sharing one server: two Neovims and a VS Code window (code-server), each with
the plugin's default command (`specfill attach`), one runtime folder."""

from __future__ import annotations

import os
import signal

import pytest

from bench.lsp_client import shared_server_pids
from tests.editor_sample import SOURCE
from tests.nvim_helpers import ghost, server_stats, start_nvim, wait_for, wait_ready
from tests.shared_helpers import alive, kill_shared_servers, wait_until
from tests.vscode_helpers import CodeServer

pytestmark = pytest.mark.editors

# Always the whole prompt (promptBudgetMs 0): the short one's size follows the read rate measured
# on the machine, and on some sizes the model's first token ends the line, which shows no ghost.
SETUP = "{ completion = { budgetMs = 30000, minConfidence = 0, promptBudgetMs = 0 } }"


def _shared_log(runtime) -> str:
    (log,) = runtime.glob("specfill/*.log")
    return log.read_text()


def _type_and_see(nvim, path, typed="    return ") -> str:
    nvim.command(f"edit {path}")
    nvim.command("setlocal noautoindent nosmartindent indentexpr=")
    wait_ready(nvim)
    nvim.input(f"Go{typed}")
    return ghost(nvim)


def test_two_neovims_and_a_vscode_window_share_one_server(tmp_path):
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    folders = {name: tmp_path / name for name in ("nvim-a", "nvim-b", "vscode")}
    for folder in folders.values():
        folder.mkdir()
        (folder / "shapes.py").write_text(SOURCE)
    a = start_nvim(SETUP, runtime=runtime)
    b = None
    vscode = CodeServer(tmp_path / "code", {"specfill.completion.budgetMs": 30000,
                                               "specfill.completion.promptBudgetMs": 0})
    vscode.runtime = runtime  # the same user's runtime folder: the same shared server
    vscode.env["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        assert _type_and_see(a, folders["nvim-a"] / "shapes.py").strip()
        vscode.start(folders["vscode"])
        result = vscode.drive(folders["vscode"], "shapes.py", "    return ", tmp_path / "shared-vscode.png")
        assert result["ok"], result
        b = start_nvim(SETUP, runtime=runtime)
        assert _type_and_see(b, folders["nvim-b"] / "shapes.py").strip()

        # One server, one model load, every editor a session of it. VS Code's window may end its
        # session when the browser driving it closes (code-server's choice, seen in one CI run):
        # the log counts the sessions opened, the stats those still open.
        assert len(shared_server_pids(runtime)) == 1
        log = _shared_log(runtime)
        assert log.count("model loaded in") == 1 and log.count(" opened (") == 3
        stats = server_stats(b)
        assert stats["shared"] is True and stats["sessions"] in (2, 3)

        # Closing one Neovim leaves the others served.
        a.close()
        a = None
        wait_until(lambda: "session 1 closed" in _shared_log(runtime), 30, "the server to see the first Neovim go")
        # The same line typed again, not a new one below it: after a second dangling `return`
        # the sample no longer makes the model's continuation sure, and an empty answer shows no ghost.
        b.input("<Esc>S    return ")
        assert ghost(b).strip()

        # A killed server: the plugin says so, and the next keystroke starts another.
        (pid,) = shared_server_pids(runtime)
        os.kill(pid, signal.SIGKILL)
        wait_for(b, "require('specfill').lost == true and require('specfill').client() == nil", 30)
        assert "the server stopped" in b.command_output("messages")
        b.input("x")
        wait_for(b, "require('specfill').client() ~= nil", 30)
        assert wait_ready(b)["shared"] is True
        b.input("<BS>")
        assert ghost(b).strip()
        first, second = shared_server_pids(runtime)
        assert second != first and alive(second)
    finally:
        for nvim in (a, b):
            if nvim is not None:
                nvim.close()
        vscode.stop()
        kill_shared_servers(runtime)
