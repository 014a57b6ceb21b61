"""The VS Code extension in a real VS Code (code-server 4.96.4), driven headless."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.editor_sample import SOURCE
from tests.vscode_helpers import CodeServer

pytestmark = pytest.mark.editors


@pytest.fixture
def vscode(tmp_path):
    # The LSP trace lands in the test's folder (data/logs/.../N-specfill.log) for a failure.
    # The server's own log (SPECFILL_LOG_FILE, at logLevel debug) shows what the editor told it.
    server = CodeServer(tmp_path / "vscode", {"specfill.completion.budgetMs": 30000, "specfill.logLevel": "debug",
                                              "specfill.trace.server": "verbose"},
                        env={"SPECFILL_LOG_FILE": str(tmp_path / "server.log")})
    yield server
    server.stop()


def test_ghost_text_appears_and_tab_accepts_it(vscode, tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    path = folder / "shapes.py"
    path.write_text(SOURCE)
    vscode.start(folder)
    shot = tmp_path / "vscode-ghost-text.png"
    # Landing at the end sends specfill/didFocus once the cursor rests; typing waits for the
    # server's answer to it (VS Code may ask for a suggestion there at the same moment).
    log = tmp_path / "server.log"
    result = vscode.drive(folder, "shapes.py", "    return ", shot, wait_log=(log, "didFocus: "))
    assert result["ok"], result
    assert shot.exists()
    if os.environ.get("SPECFILL_SCREENSHOTS"):  # README figure: SPECFILL_SCREENSHOTS=docs
        shutil.copy(shot, Path(os.environ["SPECFILL_SCREENSHOTS"]) / shot.name)
    ghost = result["ghost"].strip()
    assert ghost
    text = path.read_text()
    assert text != SOURCE
    typed_line = text[len(SOURCE):]
    assert typed_line.startswith("    return ")
    # The accepted suggestion is what was shown (Monaco renders spaces as non-breaking ones).
    assert ghost.replace("\xa0", " ").split("\n")[0].strip() in typed_line
    # The status bar: the server's p50 latency and the share of shown suggestions accepted,
    # which is above 0 only if Tab's acceptance reached the server (the item's command).
    (status,) = [s for s in result["status"] if "specfill" in s]
    assert " ms" in status and status.endswith("%") and not status.endswith(" 0%")
    # The server read the place ahead, or a request VS Code sent there first read it.
    server_log = log.read_text()
    assert f"didFocus: reading ahead at {path}" in server_log and "read ahead: " in server_log \
        or f"didFocus: a request came first, not reading ahead at {path}" in server_log
    # The client's own setting (trace.server, set above) is not the server's to reject.
    assert "invalid setting" not in server_log
