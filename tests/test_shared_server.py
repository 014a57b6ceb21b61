"""One shared server for every editor window: sessions through `specfill attach` over stdio,
a real daemon on a Unix socket, the real model."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.lsp_helpers import REPEATED, complete, end_of, field, open_doc, stats, wait_ready
from tests.shared_helpers import (
    ATTACH,
    alive,
    attach_client,
    daemon_log,
    daemon_pids,
    kill_daemons,
    shared_env,
    socket_of,
    status,
    wait_until,
)

OPTIONS = {"completion": {"promptBudgetMs": 0, "afterAccept": False}}


@pytest.fixture
def env(tmp_path):
    env = shared_env(tmp_path)
    yield env
    kill_daemons(env)


async def certain_completion(client, uri: str) -> str:
    """A completion of a text whose continuation is certain (`1, ` again) on any CPU."""
    open_doc(client, text=REPEATED, uri=uri)
    await wait_ready(client)
    line, character = end_of(REPEATED)
    result = await complete(client, line, character, uri=uri)
    assert result.items, "no suggestion"
    return result.items[0].insert_text.lstrip()


@pytest.mark.asyncio
async def test_two_editors_share_one_server_and_one_model_and_closing_one_leaves_the_other(env):
    a = await attach_client(env, OPTIONS, name="editor-a")
    b = await attach_client(env, OPTIONS, name="editor-b")
    try:
        assert (await certain_completion(a, "file:///tmp/a/list.py")).startswith("1,")
        assert (await certain_completion(b, "file:///tmp/b/list.py")).startswith("1,")
        assert len(daemon_pids(env)) == 1
        assert daemon_log(env).count("model loaded in") == 1
        s = await stats(b)
        assert field(s, "shared") is True and field(s, "sessions") == 2
        report = status(env)
        assert sorted(x["editor"] for x in report["sessions"]) == ["editor-a", "editor-b"]
        assert [(m["state"], m["sessions"]) for m in report["models"]] == [("ready", 2)]
        await a.shutdown_session()  # shutdown and exit end that session only
        assert a._server.returncode == 0
        assert (await certain_completion(b, "file:///tmp/b/other.py")).startswith("1,")
        assert field(await stats(b), "sessions") == 1
    finally:
        for c in (a, b):
            if c._server and c._server.returncode is None:
                await c.shutdown_session()


@pytest.mark.asyncio
async def test_the_socket_and_its_folder_are_the_users_alone(env):
    client = await attach_client(env, OPTIONS)
    try:
        path = socket_of(env)
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert path.name.startswith("specfill-") and path.suffix == ".sock"
    finally:
        await client.shutdown_session()


@pytest.mark.asyncio
async def test_a_killed_server_is_reported_and_the_next_start_replaces_its_socket(env):
    client = await attach_client(env, OPTIONS)
    await wait_ready(client)
    (pid,) = daemon_pids(env)
    os.kill(pid, signal.SIGKILL)
    code = await asyncio.wait_for(client._server.wait(), 30)
    assert code == 1  # the editor sees its server end, with the reason on stderr
    await client.stop()
    assert socket_of(env).exists()  # what the killed server left
    again = await attach_client(env, OPTIONS)
    try:
        assert (await certain_completion(again, "file:///tmp/a/list.py")).startswith("1,")
        first, second = daemon_pids(env)
        assert second != first and alive(second)
    finally:
        await again.shutdown_session()


def test_the_reason_a_killed_server_gives_the_editor(env):
    attach = subprocess.Popen(ATTACH, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: daemon_pids(env), 60, "the shared server")
    wait_until(lambda: "session 1 opened" in daemon_log(env), 30, "the session")
    os.kill(daemon_pids(env)[0], signal.SIGKILL)
    assert attach.wait(timeout=30) == 1  # its stdin still open: the editor is there
    assert b"the shared server ended the connection unasked" in attach.stderr.read()
    attach.stdin.close()


def _status_over(stdin_stdout: subprocess.Popen) -> int:
    """The pid of the shared server behind one attach, asked over its stdio."""
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "specfill/sharedStatus", "params": {}}'
    stdin_stdout.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    stdin_stdout.stdin.flush()
    out = stdin_stdout.stdout
    length = 0
    while (line := out.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(out.read(length))["result"]["pid"]


def test_editors_starting_at_once_make_one_server(env):
    attaches = [subprocess.Popen(ATTACH, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for _ in range(8)]
    try:
        pids = {_status_over(a) for a in attaches}
        assert len(pids) == 1
        assert daemon_pids(env) == list(pids)
    finally:
        for a in attaches:
            a.stdin.close()
            a.wait(timeout=30)


def test_the_server_exits_after_its_idle_time(env):
    attach = subprocess.Popen([*ATTACH, "--idle-exit", "1"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    pid = _status_over(attach)
    attach.stdin.close()  # the editor went away
    assert attach.wait(timeout=30) == 0
    wait_until(lambda: not alive(pid), 30, "the idle server to exit")
    assert "no session for 1 s: exiting" in daemon_log(env)
    assert not socket_of(env).exists()


def test_another_build_gets_its_own_server(env, tmp_path):
    """A llama.cpp library elsewhere (another wheel first on the path) is another build."""
    import llama_cpp

    site = tmp_path / "site"
    shutil.copytree(Path(llama_cpp.__file__).parent, site / "llama_cpp")
    other = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))}
    assert socket_of(other) != socket_of(env)
    mine = subprocess.Popen(ATTACH, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    theirs = subprocess.Popen(ATTACH, env=other, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        assert _status_over(mine) != _status_over(theirs)
    finally:
        for a in (mine, theirs):
            a.stdin.close()
            a.wait(timeout=30)
        kill_daemons(other)


NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
# From the socket's folder, as `specfill attach` does: a test's temporary folder can make the
# path longer than a Unix socket address holds.
CONNECT = ("import os, socket, sys\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "try:\n"
           "    os.chdir(os.path.dirname(sys.argv[1]))\n"
           "    s.connect(os.path.basename(sys.argv[1]))\n"
           "except OSError as e:\n"
           "    print('refused:', e.strerror); sys.exit(0)\n"
           "s.settimeout(20)\n"
           "try:\n"  # the server may close before the message is sent: that is a refusal too
           "    s.sendall(b'Content-Length: 2\\r\\n\\r\\n{}')\n"
           "    print('closed' if s.recv(100) == b'' else 'answered')\n"
           "except (BrokenPipeError, ConnectionResetError):\n"
           "    print('closed')\n")


def _as_nobody(path: Path) -> str:
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a client as another user")
    run = subprocess.run([*NOBODY, "/usr/bin/python3", "-c", CONNECT, str(path)], capture_output=True, text=True,
                         check=False, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_another_user_cannot_reach_the_socket(env):
    attach = subprocess.Popen(ATTACH, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _status_over(attach)
        assert _as_nobody(socket_of(env)).startswith("refused: Permission denied")
    finally:
        attach.stdin.close()
        attach.wait(timeout=30)


def test_another_users_connection_is_refused_even_where_the_socket_is_open(env):
    """Peer credentials: behind the private folder, the server itself checks who connects."""
    folder = Path(tempfile.mkdtemp(prefix="specfill-open-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        path = folder / "open.sock"
        attach = subprocess.Popen([*ATTACH, "--socket", str(path)], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        pid = _status_over(attach)
        path.chmod(0o666)
        try:
            assert _as_nobody(path) == "closed"
            log = path.with_suffix(".log").read_text()
            assert "refused a connection from uid 65534" in log
            assert _status_over(attach) == pid  # and it goes on serving its own user
        finally:
            attach.stdin.close()
            attach.wait(timeout=30)
            os.kill(pid, signal.SIGKILL)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_serve_stays_one_server_for_one_editor(tmp_path):
    """`specfill serve` (server.shared false, or server.path's own) makes no socket."""
    env = shared_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "lsp_server", "serve"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "specfill/sharedStatus", "params": {}}'
    proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    proc.stdin.flush()
    time.sleep(0.5)
    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(timeout=30)
    assert b'"shared": false' in out.replace(b'"shared":false', b'"shared": false')
    assert not list((tmp_path / "run").glob("**/*.sock"))


def test_a_runtime_folder_deeper_than_a_socket_address_allows(tmp_path):
    """A Unix socket address holds 108 bytes; a deep HOME or runtime folder is longer."""
    env = shared_env(tmp_path / ("deep-" * 12))
    assert len(bytes(socket_of(env))) > 108
    attach = subprocess.Popen(ATTACH, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert _status_over(attach) == daemon_pids(env)[0]
    finally:
        attach.stdin.close()
        attach.wait(timeout=30)
        kill_daemons(env)


@pytest.mark.asyncio
async def test_settings_are_per_session_and_another_model_gets_its_own_engine(env, gemma_path):
    a = await attach_client(env, OPTIONS, name="editor-a")
    off = await attach_client(env, {**OPTIONS, "completion": {**OPTIONS["completion"], "enable": False}},
                              name="editor-off")
    gemma = await attach_client(env, {**OPTIONS, "model": {"path": str(gemma_path)}}, name="editor-gemma")
    try:
        assert (await certain_completion(a, "file:///tmp/a/list.py")).startswith("1,")
        open_doc(off, text=REPEATED, uri="file:///tmp/off/list.py")
        await wait_ready(off)
        assert not (await complete(off, *end_of(REPEATED), uri="file:///tmp/off/list.py")).items
        await wait_ready(gemma)
        models = {Path(m["model"]).name: m["sessions"] for m in status(env)["models"]}
        assert len(models) == 2 and sorted(models.values()) == [1, 2]
        assert any("gemma" in name.lower() for name in models)
        await gemma.shutdown_session()
        wait_until(lambda: "no session uses it" in daemon_log(env), 30, "the second model to be unloaded")
        assert [m["sessions"] for m in status(env)["models"]] == [2]
        assert (await certain_completion(a, "file:///tmp/a/again.py")).startswith("1,")
    finally:
        for c in (a, off):
            await c.shutdown_session()
