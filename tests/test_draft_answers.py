"""The first keystrokes while a heavy target reads: the draft model answers from the short
prompt, and the target takes over once its full prompt is read.

A heavy target is the embedded model whose measured read rate is made many times slower
(the rate is what the server decides on); the draft is the same model file, so its answer
from the short prompt is the target's own, token for token, on this certain text."""

from __future__ import annotations

import threading

import pytest
from lsp_helpers import REPEATED

from lsp_server.backends.backend import Request
from lsp_server.backends.local import LocalBackend
from lsp_server.backends.read_ahead import ReadAhead
from lsp_server.settings import Settings

HEAVY = 200.0  # times the embedded model's read time: a 2,000-token prompt takes minutes


def _backend(model_path, draft: bool) -> tuple[LocalBackend, Settings]:
    s = Settings()
    s.model.draft_path = str(model_path) if draft else ""
    local = LocalBackend.open(s, ReadAhead(), threading.Event(), [])
    local.costs.read.scale = HEAVY
    local.costs.read.seen = 1  # its own reads must not undo the slow rate at once
    return local, s


def _ask(local: LocalBackend, s: Settings, prefix: str):
    return local.complete(Request(prefix, "\n", "nums.py", s, threading.Event()))


@pytest.fixture(scope="module")
def text() -> str:
    return "import math\n\n\n" + "\n".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(60)) + "\n" + REPEATED


def test_the_draft_answers_while_the_heavy_target_reads_and_the_target_takes_over(model_path, text):
    local, s = _backend(model_path, draft=True)
    alone, s_alone = _backend(model_path, draft=False)
    try:
        first = _ask(local, s, text)
        assert first.short and first.by_draft and first.text.startswith("1, 1,")
        assert first.n_prompt < 200, "the short prompt, not the full one"
        assert not local.engine.held(local.planner.short_seq("nums.py")), "the target read nothing for it"
        target = _ask(alone, s_alone, text)
        assert target.short and not target.by_draft
        assert first.tokens == target.tokens, "the same weights answer the same from the same prompt"
        # typing on, the draft keeps answering there: the target's short prompt stays unread
        again = _ask(local, s, text + "1, ")
        assert again.by_draft and again.n_prompt - again.n_reused <= 4
        local.read_pending()  # idle: the full prompt is read in the background
        local.costs.read.scale = 1.0
        after = _ask(local, s, text + "1, ")
        assert not after.short and not after.by_draft and after.text.startswith("1, 1,")
        assert local.stats()["draft"] is not None
    finally:
        local.close()
        alone.close()


def test_a_draft_no_faster_than_the_target_never_answers_for_it(model_path, text):
    local, s = _backend(model_path, draft=True)
    try:
        local.draft.costs.read.scale = HEAVY  # the draft reads as slowly as the target
        first = _ask(local, s, text)
        assert first.short and not first.by_draft
    finally:
        local.close()
