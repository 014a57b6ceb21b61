"""The VS Code extension in a real VS Code (code-server 4.96.4), driven headless."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lsp_server.models.catalog import BY_NAME
from speculative import resolve_model_path
from tests.editor_sample import PICTURE, PICTURE_SUGGESTION, PICTURE_TYPED, SOURCE, picture_file
from tests.hub_server import Hub
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
    """Also the README's first picture: a right suggestion (tests/test_model_premises.py shows it
    is certain), and the status bar's wait for a new suggestion and share accepted."""
    path = picture_file()
    folder = path.parent
    vscode.start(folder)
    shot = tmp_path / "vscode-ghost-text.png"
    # Landing at the end sends specfill/didFocus once the cursor rests; typing waits for the
    # server's answer to it (VS Code may ask for a suggestion there at the same moment).
    log = tmp_path / "server.log"
    result = vscode.drive(folder, path.name, PICTURE_TYPED, shot, wait_log=(log, "didFocus: "),
                          ghost_line=PICTURE_SUGGESTION)
    assert result["ok"], result.get("error")
    assert shot.exists()
    if os.environ.get("SPECFILL_SCREENSHOTS"):  # README figure: SPECFILL_SCREENSHOTS=docs
        shutil.copy(shot, Path(os.environ["SPECFILL_SCREENSHOTS"]) / shot.name)
    # Right, and whole without another keystroke: when the line takes longer than a moment the
    # server answers with what it has (pipeline.PARTIAL_MS), then asks the editor to ask again
    # once the line is whole (specfill/inlineCompletion/refresh).
    shown = result["ghost"].replace("\xa0", " ").split("\n")[0]  # Monaco shows spaces as non-breaking ones
    assert shown.startswith(PICTURE_SUGGESTION), shown
    text = path.read_text()
    typed_line = text[len(PICTURE):]
    assert typed_line.startswith(PICTURE_TYPED + shown)  # Tab took what was shown
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


CONTROLS = {"specfill.completion.budgetMs": 30000, "specfill.completion.minConfidence": 0,
            "specfill.logLevel": "debug"}
ON = r"specfill(?! off| snoozed)"  # the status bar once suggestions are on again


def test_the_status_bar_menu_turns_markdown_on_and_snoozes(tmp_path):
    """Markdown is off by default: no ghost text until the menu turns it on, which writes the
    setting; then Snooze pauses suggestions and End snooze brings them back."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.md").write_text("# Shapes\n\nThe area of a circle is pi times the radius squared.\n")
    log = tmp_path / "server.log"
    vscode = CodeServer(tmp_path / "vscode", CONTROLS, env={"SPECFILL_LOG_FILE": str(log)})
    try:
        vscode.start(folder)
        result = vscode.drive(folder, "notes.md", "", tmp_path / "vscode-controls.png", steps=[
            {"status": r"off \(markdown\)"},
            {"type": "The area of a square is "},
            {"noGhost": 2500},  # several debounce periods
            {"menu": "Turn on for markdown"},
            {"status": ON},
            {"type": "t"},
            {"ghost": True},
            {"press": "Escape"},
            {"menu": "Snooze for 5 minutes"},
            {"status": "snoozed 5m"},
            {"type": "he side"},
            {"noGhost": 2500},
            {"menu": "End snooze"},
            {"status": ON},
            {"press": "Alt+Backslash"},  # ask again where the snoozed keystrokes got nothing
            {"ghost": True},
        ])
    finally:
        vscode.stop()
    assert result["ok"], result
    assert all(g.strip() for g in result["ghosts"])
    settings = json.loads((vscode.data / "User" / "settings.json").read_text())
    assert settings["specfill.completion.languages"] == {"markdown": True}
    # While markdown was off the server was asked and said no; while snoozed it was not asked.
    assert "suggestions are off for markdown (completion.languages)" in log.read_text()


def test_manual_mode_shows_ghost_text_only_after_the_trigger_key(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "shapes.py").write_text(SOURCE)
    vscode = CodeServer(tmp_path / "vscode", {**CONTROLS, "specfill.completion.trigger": "manual"})
    try:
        vscode.start(folder)
        result = vscode.drive(folder, "shapes.py", "", tmp_path / "vscode-manual.png", steps=[
            {"type": "    return "},
            {"noGhost": 2500},
            {"press": "Alt+Backslash"},
            {"ghost": True},
        ])
    finally:
        vscode.stop()
    assert result["ok"], result
    assert result["ghosts"][0].strip()


def test_choose_model_downloads_a_model_of_the_list_and_its_draft(tmp_path):
    """specfill: Choose Model -> a model of the list, downloaded with progress from a hub on
    127.0.0.1 (HF_ENDPOINT), its draft partner taken from the offer: both files in the cache,
    model.path and model.draftPath set to their names, and the new model suggesting."""
    model = resolve_model_path(None).read_bytes()
    # The session's cache (tests/conftest.py): the profile of these bytes is measured once. Names
    # no other test pulls there, so this pull downloads.
    target, draft = BY_NAME["qwen2.5-coder-3b"], BY_NAME["qwen2.5-coder-0.5b"]
    hub = Hub(files={(target.repo, target.file): model, (draft.repo, draft.file): model}, bytes_per_s=25e6)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "shapes.py").write_text(SOURCE)
    log, cache = tmp_path / "server.log", Path(os.environ["SPECFILL_CACHE_DIR"])
    vscode = CodeServer(tmp_path / "vscode", {**CONTROLS, "specfill.model.weights": "shipped"},
                        env={"SPECFILL_LOG_FILE": str(log), "HF_ENDPOINT": hub.url})
    try:
        vscode.start(folder)
        result = vscode.drive(folder, "shapes.py", "", tmp_path / "vscode-choose-model.png",
                              wait_log=(log, "settings from initialize"), steps=[
            {"command": "specfill: Choose Model"},
            {"pick": target.name},
            {"notification": f"downloading {target.name}"},
            {"button": "Use the draft"},
            {"notification": f"now completing with {target.name} drafted by {draft.name}"},
            {"log": f"{target.file} ("},  # the server loaded it
            {"type": "    return "},
            {"ghost": True},
        ])
    finally:
        vscode.stop()
        hub.close()
    assert result["ok"], result.get("error")
    settings = json.loads((vscode.data / "User" / "settings.json").read_text())
    assert settings["specfill.model.path"] == target.name and settings["specfill.model.draftPath"] == draft.name
    for entry in (target, draft):
        assert (cache / "models" / "hub" / entry.repo / entry.file).read_bytes() == model
    assert [r for r in hub.requests if r[0] == "GET"], "downloaded from the hub on loopback"
