"""What the end-to-end tests count on the model writing, checked on the real model.

A test that needs a long generation uses a text whose greedy continuation is certain: at every
token the model's choice leads its runner-up by a margin far wider than the rounding that
another CPU's kernels bring (docs/testing.md). If a new model or build breaks that, this says
so by name, instead of a cancellation test failing for no visible reason.
"""

from __future__ import annotations

from decode_helpers import decode
from lsp_helpers import REPEATED

MARGIN = 2.0  # logits between the chosen token and the next, at every token


def test_the_repeated_line_goes_on_for_hundreds_of_tokens_each_by_a_wide_margin(engine):
    engine.reset()
    r = decode(engine, engine.tokenize(REPEATED), max_tokens=420, trace=True)
    assert r.stop_reason == "max_tokens" and len(r.tokens) == 420
    assert set(r.text.replace(" ", "").split(",")) <= {"1", ""}
    assert min(t["gap"] for t in r.trace) >= MARGIN
