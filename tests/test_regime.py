"""The heavier-target regime's models (bench/regime.py): a twin whose logits are the
original's bit for bit at several times its cost, and a truncated copy that loads and drafts."""

import gguf
import numpy as np
import pytest
from decode_helpers import decode
from same_output import assert_same_greedy

from bench import regime
from bench.bound import draft_runs
from speculative.cost_model import CostModel
from speculative.drafters import DraftModel
from speculative.engine import Engine

CODE = "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n"


@pytest.fixture(scope="module")
def source():
    return regime._source()


def test_the_twin_has_the_originals_logits_and_its_weight_bytes_times_the_factor(source, engine):
    path = regime.twin(2, source)
    assert 1.6 < path.stat().st_size / source.stat().st_size < 2.4
    original, twin = Engine(source, n_ctx=512), Engine(path, n_ctx=512)
    try:
        tokens = original.tokenize(CODE * 2)[:60]
        a = original.eval(tokens, want_rows=range(len(tokens)))
        b = twin.eval(tokens, want_rows=range(len(tokens)))
        assert max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True)) == 0.0
        steps = [original.eval([t], want_rows=[0])[0] for t in tokens[:4]]
        assert all(np.array_equal(x, twin.eval([t], want_rows=[0])[0]) for x, t in zip(steps, tokens[:4], strict=True))
    finally:
        original.close()
        twin.close()


def test_a_truncated_copy_loads_and_its_drafts_are_verified_losslessly(source, engine):
    draft = Engine(regime.truncated(20, source), n_ctx=1024)
    target = Engine(source, n_ctx=1024)
    try:
        assert draft.n_vocab == target.n_vocab
        prompt = target.tokenize(CODE * 3)
        plain = decode(target, prompt, max_tokens=24, trace=True)
        drafter = DraftModel(draft, target, CostModel({1: 0.01, 32: 0.02}))
        target.truncate(len(prompt) - 1)
        spec = decode(target, prompt, max_tokens=24, drafter=drafter, costs=CostModel({1: 10.0, 32: 12.0}))
        assert spec.drafted > 0 and spec.accepted <= spec.drafted  # how many it gets right is the bench's
        assert_same_greedy(plain, spec.tokens, "the truncated draft's")
    finally:
        draft.close()
        target.close()


def test_a_name_past_the_layers_is_a_clear_error(source):
    with pytest.raises(ValueError, match="trunc:99: the model has 30 layers"):
        regime.truncated(99, source)


def test_a_copy_without_middle_layers_drops_them_and_its_drafts_are_verified_losslessly(source, engine):
    with pytest.raises(ValueError, match="skip:29-31: the model has 30 layers"):
        regime.skipped(29, 31, source)
    path = regime.skipped(14, 15, source)
    assert int(gguf.GGUFReader(path).fields["llama.block_count"].contents()) == 28
    draft = Engine(path, n_ctx=1024)
    try:
        engine.reset()
        prompt = engine.tokenize(CODE * 3)
        plain = decode(engine, prompt, max_tokens=24, trace=True)
        runs = draft_runs(draft, prompt, plain.tokens)  # how often it agrees is the bench's to say
        assert len(runs) == len(plain.tokens) and runs[-1] == 0
        drafter = DraftModel(draft, engine, CostModel({1: 0.01, 32: 0.02}))
        engine.truncate(len(prompt) - 1)
        spec = decode(engine, prompt, max_tokens=24, drafter=drafter, costs=CostModel({1: 10.0, 32: 12.0}))
        assert spec.drafted > 0 and spec.accepted <= spec.drafted
        assert_same_greedy(plain, spec.tokens, "the draft without two middle layers")
    finally:
        draft.close()
        engine.reset()
