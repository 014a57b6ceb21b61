"""KV prefix reuse is exact: reused state gives the logits and output of a fresh evaluation."""

import threading
from pathlib import Path

import numpy as np
from decode_helpers import decode
from same_output import assert_same_greedy

from speculative import Engine

CODE = (Path(__file__).parents[1] / "speculative" / "engine.py").read_text()


def test_reused_prefix_gives_same_logits_as_fresh_eval(engine, model_path):
    tokens = engine.tokenize(CODE)[:300]
    engine.reset()
    engine.prefill(tokens[:250])
    logits_reused, reused = engine.prefill(tokens)
    assert reused == 250
    fresh = Engine(model_path, n_ctx=2048)
    try:
        logits_fresh, reused_fresh = fresh.prefill(tokens)
        assert reused_fresh == 0
        np.testing.assert_allclose(logits_reused, logits_fresh, atol=1e-3, rtol=0)
        assert int(np.argmax(logits_reused)) == int(np.argmax(logits_fresh))
    finally:
        fresh.close()


def test_greedy_output_same_after_reuse(engine):
    tokens = engine.tokenize(CODE)[:200]
    engine.reset()
    cold = decode(engine, tokens, max_tokens=24, trace=True)
    decode(engine, tokens[:150] + engine.tokenize(" unrelated text"), max_tokens=4)
    warm = decode(engine, tokens, max_tokens=24)
    assert warm.n_reused >= 150
    assert_same_greedy(cold, warm.tokens, "warm cache against a cold read")  # read in other batches


def test_the_same_prompt_again_reads_nothing_and_generates_the_same(engine):
    """Keystrokes within a word ask with the same (healed) prompt: the second time no token is
    read (the last prefill's logits are kept), and the output is the same."""
    tokens = engine.tokenize(CODE)[:200]
    engine.reset()
    first = decode(engine, tokens, max_tokens=12)
    steps = engine.decode_steps
    logits, reused = engine.prefill(tokens)
    assert engine.decode_steps == steps and reused == len(tokens)
    assert engine.cached == tokens  # what the generation added is rolled back
    again = decode(engine, tokens, max_tokens=12)
    assert again.n_reused == len(tokens) and again.tokens == first.tokens
    engine.prefill(tokens[:-1] + [tokens[0]])  # another prompt in between: read as before
    steps = engine.decode_steps
    _, reused = engine.prefill(tokens)
    assert engine.decode_steps > steps and reused == len(tokens) - 1
    engine.truncate(len(tokens) - 1)  # as before: the last token read again, for its logits
    reread, reused = engine.prefill(tokens)
    assert reused == len(tokens) - 1
    np.testing.assert_allclose(logits, reread, atol=1e-3, rtol=0)


def test_the_same_prompt_again_replays_what_the_last_generation_decoded(engine):
    """A generation from the same prompt reads the tokens the last one left in the cache from
    their kept rows, with no decode; past them it decodes as a fresh generation would."""
    tokens = engine.tokenize(CODE)[:200]
    engine.reset()
    fresh = decode(engine, tokens, max_tokens=20)
    engine.reset()
    short = decode(engine, tokens, max_tokens=12)
    kept, rows = engine.after()
    # Every emitted token was fed but the last, unless an end-of-generation token (never emitted) ended it.
    fed = len(short.tokens) - (short.stop_reason != "eog")
    assert kept == short.tokens[:fed] and len(rows) == fed > 0
    steps = engine.decode_steps
    again = decode(engine, tokens, max_tokens=12)
    assert engine.decode_steps == steps and again.tokens == short.tokens and again.replayed == fed
    longer = decode(engine, tokens, max_tokens=20)
    assert longer.tokens == fresh.tokens
    assert longer.decode_steps == fresh.decode_steps - fed


def test_a_superseded_generation_is_carried_on_by_the_next(engine):
    """A generation cancelled after a few tokens leaves them for the next one from the same
    prompt, which goes on from there and ends as an uninterrupted one."""
    prompt = engine.tokenize("x = [\n" + "    1,\n" * 20)
    engine.reset()
    whole = decode(engine, prompt, max_tokens=16)
    engine.reset()
    cancel = threading.Event()
    seen: list[str] = []

    def on_text(text: str) -> None:
        seen.append(text)
        if len(seen) == 5:
            cancel.set()

    cut = decode(engine, prompt, max_tokens=16, cancel=cancel, on_text=on_text)
    assert cut.stop_reason == "cancelled" and 0 < len(cut.tokens) < len(whole.tokens)
    carried = decode(engine, prompt, max_tokens=16)
    assert carried.tokens == whole.tokens
    assert carried.decode_steps == whole.decode_steps - (len(cut.tokens) - 1)


def test_what_another_prompt_read_is_not_replayed(engine):
    tokens = engine.tokenize(CODE)[:200]
    engine.reset()
    decode(engine, tokens, max_tokens=8)
    other = tokens[:-1] + engine.tokenize(" unrelated")
    decode(engine, other, max_tokens=8)
    assert engine.after()[0] == engine.cached[len(other):]
    steps = engine.decode_steps
    again = decode(engine, tokens, max_tokens=8)
    assert engine.decode_steps > steps  # the first prompt's tokens were rolled back by the second
    engine.reset()
    assert_same_greedy(decode(engine, tokens, max_tokens=8, trace=True), again.tokens, "re-read against cold")


def test_divergent_prompt_rolls_back_cache(engine):
    a = engine.tokenize("def add(a, b):\n    return a + b\n")
    b = engine.tokenize("def sub(a, b):\n    return a - b\n")
    decode(engine, a, max_tokens=2)
    result = decode(engine, b, max_tokens=2)
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert result.n_reused == common
    assert engine.cached[: len(b)] == b


def test_max_tokens_and_stop_strings(engine):
    prompt = engine.tokenize("for i in range(10):\n    print(i)\n" * 3)
    r = decode(engine, prompt, max_tokens=5)
    assert len(r.tokens) == 5 and r.stop_reason == "max_tokens"
    r = decode(engine, prompt, max_tokens=40, stop=["\n"])
    assert "\n" not in r.text and r.stop_reason == "stop"


def test_cancel_flag_stops_generation(engine):
    cancel = threading.Event()
    seen = []

    def on_text(text):
        seen.append(text)
        if len(seen) == 3:
            cancel.set()

    prompt = engine.tokenize("x = [\n" + "    1,\n" * 20)
    r = decode(engine, prompt, max_tokens=60, cancel=cancel, on_text=on_text)
    assert r.stop_reason == "cancelled"
    assert len(r.tokens) <= 4


def test_prompt_longer_than_context_keeps_its_end(engine):
    prompt = engine.tokenize("a = 1\n" * 2000)
    assert len(prompt) > engine.n_ctx
    r = decode(engine, prompt, max_tokens=4)
    assert r.n_prompt == engine.n_ctx - 5


def test_cancel_during_a_long_prefill_keeps_what_was_read(engine):
    prompt = engine.tokenize(CODE)[:700]
    engine.reset()
    cancel = threading.Event()
    calls = []
    original = engine.eval

    def eval_then_cancel(tokens, want_rows=(), cancel=None, **kw):
        calls.append(len(tokens))
        return original(tokens, want_rows, cancel, **kw)

    engine.eval = eval_then_cancel
    try:
        cancel.set()
        r = decode(engine, prompt, max_tokens=8, cancel=cancel)
        assert r.stop_reason == "cancelled" and r.tokens == []
        assert engine.cached == []  # cancelled before the first chunk
        # a flag set between chunks stops there; the chunks read stay cached
        cancel.clear()
        steps = engine.decode_steps
        timer = threading.Timer(0.3, cancel.set)
        timer.start()
        r = decode(engine, prompt, max_tokens=8, cancel=cancel)
        timer.join()
        assert r.stop_reason == "cancelled"
        assert 0 < len(engine.cached) < len(prompt) and engine.cached == prompt[: len(engine.cached)]
        assert engine.decode_steps - steps == len(engine.cached) // engine.n_batch
        kept = len(engine.cached)
        resumed = decode(engine, prompt, max_tokens=8)
        assert resumed.n_reused == kept  # the next request goes on from there
    finally:
        del engine.eval
