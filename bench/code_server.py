"""A real VS Code: code-server 4.96.4 (installed by `make editors` into .tools/code-server),
the packaged extension installed into it, driven by playwright-core in Debian's chromium.
Used by the editor tests and by `specfill bench-memory --vscode`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / ".tools" / "code-server"
CODE_SERVER = TOOLS / "node_modules" / ".bin" / "code-server"
VSIX = REPO / "editors" / "vscode" / "specfill.vsix"
DRIVER = REPO / "editors" / "vscode" / "e2e" / "drive.js"

USER_SETTINGS = {
    "files.hotExit": "off",
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "editor.autoIndent": "none",
    "editor.inlineSuggest.enabled": True,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "git.enabled": False,
}


def require_tools() -> None:
    missing = [p for p in (CODE_SERVER, VSIX) if not p.exists()]
    if missing:
        raise RuntimeError(f"missing {', '.join(map(str, missing))}: run `make editors` (part of `make test`)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CodeServer:
    """One code-server with its own HOME, user data and extensions folders under `root`."""

    def __init__(self, root: Path, settings: dict, env: dict | None = None, server_path: bool = True) -> None:
        require_tools()
        self.root = root
        self.home, self.data, self.ext = root / "home", root / "data", root / "extensions"
        for d in (self.home, self.data / "User", self.ext):
            d.mkdir(parents=True, exist_ok=True)
        server = {"specfill.server.path": str(Path(sys.executable).parent / "specfill")} if server_path else {}
        (self.data / "User" / "settings.json").write_text(json.dumps(  # server_path: this checkout's server
            {**USER_SETTINGS, **server, **settings}, indent=1))
        # Its own runtime folder: the shared server its windows start is this test's alone.
        self.runtime = root / "run"
        self.runtime.mkdir(mode=0o700, exist_ok=True)
        self.env = {**os.environ, "HOME": str(self.home), "XDG_RUNTIME_DIR": str(self.runtime), **(env or {})}
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def _cli(self) -> list[str]:
        return [str(CODE_SERVER), "--user-data-dir", str(self.data), "--extensions-dir", str(self.ext)]

    def start(self, folder: Path) -> None:
        subprocess.run([*self._cli(), "--install-extension", str(VSIX), "--force"], env=self.env, check=True,
                       capture_output=True, timeout=120)
        (self.root / "config.yaml").write_text("auth: none\n")
        self.log = open(self.root / "code-server.log", "w")
        self.proc = subprocess.Popen(
            [*self._cli(), "--config", str(self.root / "config.yaml"), "--bind-addr", f"127.0.0.1:{self.port}",
             "--auth", "none", "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
             str(folder)], env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                return
            except OSError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.root / "code-server.log").read_text()
                    raise RuntimeError(f"code-server did not start: {log}") from exc
                time.sleep(0.3)

    def drive(self, folder: Path, file_name: str, typed: str, screenshot: Path, timeout_ms: int = 150000,
              accept_install: bool = False, wait_log: tuple[Path, str] | None = None,
              steps: list[dict] | None = None, ghost_line: str | None = None) -> dict:
        """Open the file, type at its end, take the ghost text with Tab; or, with `steps`, run
        them instead (drive.js names the steps). With `wait_log` (a log file, a text), typing
        starts once the log has the text; with `ghost_line`, the screenshot waits for the ghost
        text's first line to start with it."""
        url = f"http://127.0.0.1:{self.port}/?folder={folder}"
        env = {**self.env, "NODE_PATH": str(TOOLS / "node_modules")}
        if accept_install:
            env["ACCEPT_INSTALL"] = "1"
        if wait_log:
            env["WAIT_LOG"], env["WAIT_LOG_TEXT"] = str(wait_log[0]), wait_log[1]
        if steps is not None:
            env["STEPS"] = json.dumps(steps)
        if ghost_line is not None:
            env["GHOST_LINE"] = ghost_line
        run = subprocess.run(["node", str(DRIVER), url, file_name, typed, str(screenshot), str(timeout_ms)],
                             check=False, env=env, capture_output=True, text=True, timeout=timeout_ms / 1000 + 120)
        try:
            return json.loads(run.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return {"ok": False, "error": f"driver failed: {run.stdout}\n{run.stderr}"}

    def stop(self) -> None:
        """Stop code-server and what it started; a shared server it joined or started outlives
        the window by server.idleMinutes, and is the caller's to stop."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)  # the extension host and its language server too
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
        if self.proc is not None:
            self.log.close()
