"""The cross-path check itself: it passes equal runs and runs that part at a near-tie, and
fails a real divergence, also one forced on the real model."""

import pytest
from decode_helpers import decode
from lsp_helpers import REPEATED
from same_output import assert_same_greedy, assert_same_greedy_text

from bench.divergence import GAP_TIE, divergence, explained, text_divergence

GAPS = [5.0, GAP_TIE / 10, 5.0, 5.0]


def test_equal_runs_and_a_parting_at_a_near_tie_are_explained():
    assert divergence([1, 2, 3, 4], GAPS, [1, 2, 3, 4]) is None
    d = divergence([1, 2, 3, 4], GAPS, [1, 7, 8, 9])
    assert d is not None and d.index == 1 and d.near_tie and explained(d)


def test_a_parting_at_a_wide_gap_or_a_run_that_stops_early_is_not():
    d = divergence([1, 2, 3, 4], GAPS, [1, 2, 9, 4])
    assert d is not None and d.index == 2 and not explained(d) and "5.000" in str(d)
    assert not explained(divergence([1, 2, 3, 4], GAPS, [1, 2]))
    assert not explained(divergence([1, 2], GAPS[:2], [1, 2, 3]))  # no gap known where it goes on


def test_the_text_form_finds_the_token_whose_bytes_differ():
    piece = {1: b"a", 2: b"bc", 3: b"d", 4: b"e"}.__getitem__
    assert text_divergence([1, 2, 3, 4], GAPS, piece, b"abcde") is None
    assert text_divergence([1, 2, 3, 4], GAPS, piece, b"abXde").index == 1
    assert not explained(text_divergence([1, 2, 3, 4], GAPS, piece, b"abcXe"))
    assert not explained(text_divergence([1, 2, 3, 4], GAPS, piece, b"abcdef"))


def test_a_real_divergence_on_the_model_fails_the_check(engine):
    prompt = engine.tokenize(REPEATED)
    reference = decode(engine, prompt, max_tokens=12, trace=True)
    assert_same_greedy(reference, reference.tokens, "the same run")
    k = 5
    assert reference.trace[k]["gap"] >= GAP_TIE  # certain text (test_model_premises checks its margin)
    forced = reference.tokens[:k] + [reference.tokens[k] + 1]
    forced += decode(engine, prompt + forced, max_tokens=12 - len(forced)).tokens
    with pytest.raises(AssertionError, match="a real divergence"):
        assert_same_greedy(reference, forced, "forced")
    text = b"".join(engine.token_bytes(t) for t in forced)
    with pytest.raises(AssertionError, match="a real divergence"):
        assert_same_greedy_text(reference, engine.token_bytes, text, "forced")
