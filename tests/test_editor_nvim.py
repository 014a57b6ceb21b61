"""The Neovim plugin in a real Neovim 0.11.4: ghost text, accept, settings, health."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lsp_server.models.catalog import BY_NAME
from speculative import resolve_model_path
from tests.editor_sample import PICTURE_SUGGESTION, PICTURE_TYPED, SOURCE, picture_file
from tests.hub_server import Hub
from tests.nvim_helpers import STATE as STATS_EXPR
from tests.nvim_helpers import ghost, press, server_stats, start_nvim, wait_for, wait_ready, without_refresh

pytestmark = pytest.mark.editors


@pytest.fixture
def nvim(tmp_path):
    path = tmp_path / "shapes.py"
    path.write_text(SOURCE)
    nvim = start_nvim()
    nvim.command(f"edit {path}")
    nvim.command("setlocal noautoindent nosmartindent indentexpr=")
    wait_ready(nvim)
    yield nvim
    nvim.exec_lua("vim.lsp.stop_client(vim.lsp.get_clients({ name = 'specfill' }), true)")
    nvim.close()


def buffer_text(nvim) -> str:
    return "\n".join(nvim.current.buffer[:]) + "\n"


def test_ghost_text_appears_and_tab_accepts_it(nvim):
    nvim.input("Go    return ")
    suggestion = press(nvim, "<Tab>")
    assert suggestion.strip()
    wait_for(nvim, "not require('specfill').ghost.current() or true")
    assert buffer_text(nvim) == SOURCE + "    return " + suggestion + "\n"
    row, col = nvim.current.window.cursor
    assert nvim.current.buffer[row - 1][:col].endswith(suggestion.split("\n")[-1])
    stats = server_stats(nvim)
    assert stats["shown"] >= 1 and stats["accepted"] == 1  # the item's command reached the server


def test_typing_what_the_ghost_says_keeps_it_without_a_new_answer(nvim):
    without_refresh(nvim)
    nvim.input("Go    return ")
    suggestion = ghost(nvim)
    assert len(suggestion) > 1
    nvim.input(suggestion[0])
    wait_for(nvim, "vim.api.nvim_get_current_line() == ...", 10, "    return " + suggestion[0])
    # Updated on the keystroke itself, before the debounce could ask the server again.
    assert nvim.exec_lua("return require('specfill').ghost.current()") == suggestion[1:]


def test_accept_word_inserts_only_the_first_word(nvim):
    nvim.input("Go    return ")
    suggestion = press(nvim, "<M-Right>")
    line = wait_for(nvim, "vim.api.nvim_get_current_line() ~= '    return ' and vim.api.nvim_get_current_line()")
    inserted = line[len("    return "):]
    assert inserted and suggestion.startswith(inserted)
    assert len(inserted) < len(suggestion) or " " not in suggestion.strip()


def test_changed_max_tokens_reaches_the_server_and_shortens_suggestions(nvim):
    nvim.input("Go    return ")
    long = ghost(nvim)
    nvim.input("<Esc>")
    wait_for(nvim, "vim.api.nvim_get_mode().mode == 'n'")
    nvim.exec_lua("require('specfill').configure({ completion = { maxTokens = 1 } })")
    nvim.input("a")
    short = ghost(nvim)
    assert long.startswith(short) and len(short) < len(long)


def test_an_answer_to_a_cancelled_request_is_not_shown(nvim):
    nvim.input("Go    return ")
    ghost(nvim)
    time.sleep(1.0)  # any refresh of that answer asked and answered
    asked = server_stats(nvim)["requests"]
    # Asked and at once cancelled, as leaving insert mode does, in the same place and mode as
    # the answer will find: the server answers from its cache before it reads the cancel.
    nvim.exec_lua("local g, b = require('specfill').ghost, vim.api.nvim_get_current_buf(); g.clear(b);"
                  " g.request(b, 2); vim.api.nvim_exec_autocmds('InsertLeave', { buffer = b })")
    wait_for(nvim, f"({STATS_EXPR} or {{}}).requests == {asked + 1}", 10)
    time.sleep(0.5)  # its answer reached the client
    assert nvim.exec_lua("return vim.api.nvim_get_mode().mode") == "i"
    assert not nvim.exec_lua("return require('specfill').ghost.current()")


def test_toggle_turns_suggestions_off(nvim):
    nvim.command("SpecfillToggle")
    nvim.input("Go    return ")
    wait_for(nvim, "vim.api.nvim_get_current_line() == '    return '")
    time.sleep(1.5)  # several debounce periods
    assert not nvim.exec_lua("return require('specfill').ghost.current()")
    assert server_stats(nvim)["requests"] == 0  # the client no longer asks


def test_bad_settings_are_named_and_dropped(tmp_path):
    nvim = start_nvim("{ completion = { maxTokens = 'many', bogus = 1 } }")
    try:
        messages = nvim.exec_lua("return vim.api.nvim_exec2('messages', { output = true }).output")
        assert "completion.maxTokens: invalid value" in messages
        assert "completion.bogus: unknown setting" in messages
        assert nvim.exec_lua("return require('specfill').settings") == {"completion": {}}
        assert nvim.exec_lua("return require('specfill').validate({ logLevel = 'debug' })") == {"logLevel": "debug"}
    finally:
        nvim.close()


def test_checkhealth_reports_executable_model_and_version(nvim):
    nvim.command("checkhealth specfill")
    report = "\n".join(nvim.current.buffer[:])
    assert "Neovim 0.11" in report
    assert "server executable" in report
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in report
    assert "server running" in report and "ready" in report
    assert "ERROR" not in report


def test_next_asks_for_candidates_and_cycles_through_them(nvim):
    nvim.input("Go    return ")
    first = ghost(nvim)
    nvim.input("<M-]>")  # one suggestion shown: ask the server for candidates (Invoked)
    n = wait_for(nvim, "require('specfill').ghost.candidates() > 1 and require('specfill').ghost.candidates()")
    # The greedy suggestion stays first: whole, where the shown one was cut at a doubted token
    # (how sure the model is of a token is one CPU's arithmetic; candidates are not cut).
    top = ghost(nvim)
    assert top.startswith(first)
    nvim.input("<M-]>")
    second = wait_for(nvim, "require('specfill').ghost.current() ~= ... and require('specfill').ghost.current()",
                      10, top)
    assert second != top and n >= 2
    nvim.input("<M-[>")
    wait_for(nvim, "require('specfill').ghost.current() == ...", 10, top)


def test_accept_line_takes_the_first_line_and_dismiss_hides_the_rest(nvim):
    nvim.exec_lua("require('specfill').configure({ completion = { multiline = 'always' } })")
    nvim.input("Go    return ")
    suggestion = press(nvim, "<M-Down>")
    first_line = suggestion.split("\n")[0]
    wait_for(nvim, "vim.api.nvim_get_current_line() == ...", 10, "    return " + first_line)
    if "\n" in suggestion:
        assert nvim.exec_lua("return require('specfill').ghost.current()") == suggestion[len(first_line):]
        nvim.input("<C-]>")
        wait_for(nvim, "require('specfill').ghost.current() == nil")
        assert not nvim.exec_lua("return vim.api.nvim_buf_get_extmarks(0, require('specfill').ghost.namespace,"
                                 " 0, -1, {})")


POINTS = "points = [\n    (0, 0),\n    (1, 1),\n    (2, 2),\n"


def test_after_tab_the_next_line_shows_at_once(tmp_path):
    """The line after an accepted suggestion was generated while it was shown: Tab, and the
    next one appears from the cache, with no model work in between. The cursor stops where
    one token ends the line: a suggestion is answered with its first text when the line takes
    longer (20 ms, or at once when other work waits), so after `(3, ` it was `3` or `3)`."""
    path = tmp_path / "points.py"
    path.write_text(POINTS)
    nvim = start_nvim()
    try:
        nvim.command(f"edit {path}")
        nvim.command("setlocal noautoindent nosmartindent indentexpr=")
        wait_ready(nvim)
        nvim.input("Go    (3, 3)")
        first = ghost(nvim)
        assert first.startswith(",")
        wait_for(nvim, f"({STATS_EXPR}).after_accept >= 1", 30)
        steps = server_stats(nvim)["decode_steps"]
        nvim.input("<Tab>")
        t0 = time.monotonic()
        following = wait_for(nvim, "require('specfill').ghost.current() ~= nil and require('specfill').ghost.current()",
                             10)
        # What Tab took may end inside the next line (a suggestion shown while still growing:
        # `,\n    (`): the line it left and the ghost after it read on together.
        waited, line = time.monotonic() - t0, nvim.exec_lua("return vim.api.nvim_get_current_line()")
        assert waited < 2 and "(4, 4)" in line + following
        assert server_stats(nvim)["decode_steps"] == steps, "served from the cache"
    finally:
        nvim.close()


GHOST = "require('specfill').ghost"


def test_a_suggestion_grows_to_its_whole_line_without_a_keystroke():
    """The README picture's certain line (tests/test_model_premises.py) shows whole after the
    keystrokes, even when the server answered with its first text (a slow line); the server's
    specfill/inlineCompletion/refresh asks again, as the request it renews and not as a new
    showing, where nothing moved, and nowhere else."""
    path = picture_file()
    nvim = start_nvim()
    try:
        nvim.command(f"edit {path}")
        nvim.command("setlocal noautoindent nosmartindent indentexpr=")
        wait_ready(nvim)
        nvim.input("Go" + PICTURE_TYPED)
        whole = wait_for(nvim, f"vim.startswith({GHOST}.current() or '', ...) and {GHOST}.current()", 60,
                         PICTURE_SUGGESTION)
        before = server_stats(nvim)
        refresh = f"{GHOST}.on_refresh(nil, {{ uri = vim.uri_from_bufnr(0) }})"
        nvim.exec_lua(f"{GHOST}.clear(0); {refresh}")
        assert wait_for(nvim, f"{GHOST}.current()", 10) == whole
        after = server_stats(nvim)
        assert after["cache_hits"] == before["cache_hits"] + 1 and after["shown"] == before["shown"]
        nvim.input("<Left>")  # the cursor moved: a refresh for the old place asks nothing
        wait_for(nvim, f"{GHOST}.current() == nil", 10)
        nvim.exec_lua(f"{GHOST}.clear(0); {refresh}")
        time.sleep(1.0)
        assert nvim.exec_lua(f"return {GHOST}.current()") is None
        assert server_stats(nvim)["requests"] == after["requests"]
    finally:
        nvim.close()


def test_landing_in_a_buffer_tells_the_server_and_the_log_shows(nvim):
    """BufEnter sends specfill/didFocus: the server reads the place's prompt with no request."""
    stats = wait_for(nvim, f"({STATS_EXPR}).read_ahead_tokens > 0 and {STATS_EXPR}", 30)
    assert stats["requests"] == 0
    nvim.command("SpecfillLog")
    log = "\n".join(nvim.current.buffer[:])
    assert "[INFO] model loaded in" in log and "settings from initialize" in log


def test_manual_mode_shows_ghost_text_only_after_the_trigger_key(tmp_path):
    path = tmp_path / "shapes.py"
    path.write_text(SOURCE)
    nvim = start_nvim("{ completion = { trigger = 'manual', minConfidence = 0, budgetMs = 30000 } }")
    try:
        nvim.command(f"edit {path}")
        nvim.command("setlocal noautoindent nosmartindent indentexpr=")
        wait_ready(nvim)
        nvim.input("Go    return ")
        wait_for(nvim, "vim.api.nvim_get_current_line() == '    return '")
        time.sleep(1.5)  # several debounce periods: nothing is asked while typing
        assert nvim.exec_lua("return require('specfill').ghost.current()") is None
        assert server_stats(nvim)["requests"] == 0
        nvim.input("<M-\\>")
        assert ghost(nvim).strip()
    finally:
        nvim.exec_lua("vim.lsp.stop_client(vim.lsp.get_clients({ name = 'specfill' }), true)")
        nvim.close()


def test_markdown_gets_no_ghost_text_until_toggled_on_for_its_filetype(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Shapes\n\nThe area of a circle is pi times the radius squared.\n")
    nvim = start_nvim("{ completion = { minConfidence = 0, budgetMs = 30000 } }")
    try:
        nvim.command(f"edit {path}")
        wait_ready(nvim)
        assert nvim.exec_lua("return require('specfill').status()") == "specfill off (markdown)"
        nvim.input("GoThe area of a square is ")
        wait_for(nvim, "vim.api.nvim_get_current_line() == 'The area of a square is '")
        time.sleep(1.5)  # several debounce periods
        assert nvim.exec_lua("return require('specfill').ghost.current()") is None
        nvim.command("SpecfillToggle")
        nvim.input("t")
        assert ghost(nvim).strip()
    finally:
        nvim.exec_lua("vim.lsp.stop_client(vim.lsp.get_clients({ name = 'specfill' }), true)")
        nvim.close()


def test_snooze_pauses_suggestions_and_toggle_ends_it(nvim):
    nvim.command("SpecfillSnooze 1")
    assert nvim.exec_lua("return require('specfill').status()") == "specfill snoozed 1m"
    nvim.input("Go    return ")
    wait_for(nvim, "vim.api.nvim_get_current_line() == '    return '")
    time.sleep(1.5)
    assert nvim.exec_lua("return require('specfill').ghost.current()") is None
    nvim.command("SpecfillToggle")
    assert nvim.exec_lua("return require('specfill').status()") == "specfill"
    nvim.input("<M-\\>")  # ask again where the snoozed keystrokes got nothing
    assert ghost(nvim).strip()


PULL_SETUP = "{ completion = { budgetMs = 30000, minConfidence = 0 }, model = { weights = 'shipped' } }"
RECORD_NOTES = ("_G.notes = {}; local notify = vim.notify;"
                " vim.notify = function(msg, ...) table.insert(_G.notes, msg); return notify(msg, ...) end")


def hub_env(hub: Hub, tmp_path) -> dict[str, str]:
    """The hub here; the session's cache (tests/conftest.py), where the profile of the served
    bytes is measured once; the kept choice in the test's folder."""
    return {"HF_ENDPOINT": hub.url, "XDG_DATA_HOME": str(tmp_path / "data")}


HUB = Path(os.environ["SPECFILL_CACHE_DIR"]) / "models" / "hub"


def test_specfill_model_pulls_a_model_of_the_list_and_takes_its_draft(tmp_path):
    model = resolve_model_path(None).read_bytes()
    target, draft = BY_NAME["deepseek-coder-6.7b"], BY_NAME["deepseek-coder-1.3b"]  # pulled by no other test
    hub = Hub(files={(target.repo, target.file): model, (draft.repo, draft.file): model}, bytes_per_s=25e6)
    path = tmp_path / "shapes.py"
    path.write_text(SOURCE)
    nvim = start_nvim(PULL_SETUP, env=hub_env(hub, tmp_path))
    try:
        nvim.command(f"edit {path}")
        wait_ready(nvim)
        nvim.exec_lua(RECORD_NOTES)
        # The draft offer (vim.ui.select), answered as a user taking the first choice.
        nvim.exec_lua("vim.ui.select = function(items, opts, on_choice) _G.asked = opts.prompt;"
                      " on_choice(items[1]) end")
        nvim.command(f"SpecfillModel {target.name}")
        wait_for(nvim, "(function(file) local c = require('specfill').client();"
                       " local r = c and c:request_sync('specfill/stats', {}, 2000); return r and r.result"
                       " and r.result.state == 'ready' and r.result.model:find(file, 1, true) end)(...)",
                 300, target.file)
        notes = nvim.exec_lua("return _G.notes")
        asked = nvim.exec_lua("return _G.asked")
        settings = nvim.exec_lua("return require('specfill').settings.model")
        nvim.input("Go    return ")
        assert ghost(nvim).strip()  # the pulled model suggests
    finally:
        nvim.exec_lua("vim.lsp.stop_client(vim.lsp.get_clients({ name = 'specfill' }), true)")
        nvim.close()
        hub.close()
    assert any(n.startswith(f"specfill: downloading {target.name}: ") and n.endswith(" MB") for n in notes), notes
    assert f"can draft with {draft.name}" in asked
    assert settings == {"weights": "shipped", "path": target.name, "draftPath": draft.name}
    for entry in (target, draft):
        assert (HUB / entry.repo / entry.file).read_bytes() == model
    kept = json.loads((tmp_path / "data" / "nvim" / "specfill" / "model.json").read_text())
    assert kept == {"path": target.name, "draftPath": draft.name}  # for the next start


def test_specfill_model_bang_cancels_a_download_and_keeps_the_model(tmp_path):
    target = BY_NAME["qwen2.5-coder-7b"]  # pulled by no other test
    hub = Hub(files={(target.repo, target.file): resolve_model_path(None).read_bytes()}, bytes_per_s=2e6)
    nvim = start_nvim(PULL_SETUP, env=hub_env(hub, tmp_path))
    try:
        nvim.exec_lua(RECORD_NOTES)
        nvim.command(f"SpecfillModel {target.name}")
        part = HUB / target.repo / f"{target.file}.part"
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size > 1_000_000):
            assert time.monotonic() < deadline, "the download never started"
            time.sleep(0.1)
        nvim.command("SpecfillModel!")
        wait_for(nvim, "vim.tbl_contains(vim.tbl_map(function(n) return n:find('cancelled', 1, true) ~= nil end,"
                       " _G.notes), true)", 30)
        notes = nvim.exec_lua("return _G.notes")
        settings = nvim.exec_lua("return require('specfill').settings.model")
    finally:
        nvim.close()
        hub.close()
    assert any("the model in use stays" in n for n in notes), notes
    assert settings == {"weights": "shipped"} and part.exists()
    assert not (HUB / target.repo / target.file).exists()
