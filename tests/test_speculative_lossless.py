"""Speculation is lossless: every emitted token is the target's own choice, whatever is drafted."""

import argparse
import dataclasses
import sysconfig
import threading
from pathlib import Path

import numpy as np
import pytest
from decode_helpers import decode
from lsp_helpers import REPEATED
from same_output import assert_same_greedy, near_ties

from speculative import Engine, ModelError
from speculative.cost_model import CostModel, ReadRate
from speculative.drafters import (
    PROBES,
    REPROBE,
    SURE_BANDS,
    Acceptance,
    Auto,
    Draft,
    DraftModel,
    Looks,
    PromptLookup,
    check_same_vocab,
)
from speculative.seqs import FULL, SHORT

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SOURCES = ["json/encoder.py", "argparse.py", "csv.py"]


def eager():
    """A cost model that makes every draft look worth verifying, to drive the verify path hard."""
    return CostModel({1: 100.0, 32: 100.0}, margin=1.0)


EAGER = "eager"


def cuts(engine, n_tokens=400):
    """Real code: prompts cut from stdlib files at a few places each."""
    out = []
    for name in SOURCES:
        ids = engine.tokenize((STDLIB / name).read_text(), parse_special=False)
        for end in (900, 1700):
            out.append(ids[end - n_tokens:end])
    return out


class GarbageDrafter:
    """A deliberately wrong drafter: proposes tokens the target will not pick."""

    name = "garbage"

    def __init__(self, k=6):
        self.k, self.rng = k, np.random.default_rng(0)

    def begin(self, extra=(), *, prompt=(), seq=0):
        pass

    def end(self, completion):
        pass

    def propose(self, seq, k_cap, costs):
        k = min(self.k, k_cap)
        return Draft([int(t) for t in self.rng.integers(100, 40000, size=k)], "garbage") if k else None

    def feedback(self, draft, accepted):
        pass


@pytest.fixture(scope="module")
def prompts(engine):
    return cuts(engine)


@pytest.fixture(scope="module")
def plain_outputs(engine, prompts):
    return [decode(engine, p, max_tokens=40, trace=True) for p in prompts]


def check_trace(result):
    assert len(result.trace) == len(result.tokens)
    for entry, tok in zip(result.trace, result.tokens, strict=True):
        assert entry["token"] == tok == entry["argmax"]


@pytest.mark.parametrize("cost_model", [None, EAGER], ids=["measured-costs", "eager-costs"])
def test_lookup_output_equals_plain_greedy_and_every_token_is_the_targets_argmax(engine, prompts, plain_outputs,
                                                                                 cost_model, costs):
    costs = eager() if cost_model == EAGER else costs
    lookup = PromptLookup()
    drafted = 0
    for prompt, plain in zip(prompts, plain_outputs, strict=True):
        r = decode(engine, prompt, max_tokens=40, drafter=lookup, costs=costs, trace=True)
        assert_same_greedy(plain, r.tokens, "lookup")
        check_trace(r)
        drafted += r.drafted
    if cost_model == EAGER:
        assert drafted > 0  # the verify path really ran


def test_wrong_drafter_rolls_back_and_stays_lossless(engine, prompts, plain_outputs):
    for prompt, plain in zip(prompts, plain_outputs, strict=True):
        r = decode(engine, prompt, max_tokens=40, drafter=GarbageDrafter(), costs=eager(), trace=True)
        assert_same_greedy(plain, r.tokens, "garbage drafts")
        check_trace(r)
        assert r.drafted > r.accepted
        # rejected drafts left the KV cache: it holds the prompt and emitted tokens only
        assert engine.cached[: len(prompt)] == list(prompt)
        assert engine.cached[len(prompt):] == r.tokens[: len(engine.cached) - len(prompt)]
        assert len(engine.cached) <= len(prompt) + len(r.tokens)


def test_sampling_with_temperature_matches_plain_sampling(engine, prompts):
    # Sample-and-match keeps the target's distribution; with the same seed and a
    # batch-invariant build it reproduces plain sampling token for token.
    for prompt in prompts[:3]:
        plain = decode(engine, prompt, max_tokens=32, temperature=0.8, seed=7)
        spec = decode(engine, prompt, max_tokens=32, temperature=0.8, seed=7, drafter=GarbageDrafter(3),
                               costs=eager())
        look = decode(engine, prompt, max_tokens=32, temperature=0.8, seed=7, drafter=PromptLookup(),
                               costs=eager())
        assert spec.tokens == plain.tokens == look.tokens


@pytest.fixture(scope="module")
def self_draft(engine, model_path):
    draft_engine = Engine(model_path, n_ctx=2048)
    yield DraftModel(draft_engine, engine, CostModel({1: 0.0, 32: 0.0}))
    draft_engine.close()


def test_same_model_as_its_own_draft_is_lossless_and_accepts_everything(engine, prompts, plain_outputs,
                                                                        self_draft):
    for prompt, plain in zip(prompts[:3], plain_outputs[:3], strict=True):
        self_draft.ms_per_token = 0.0
        r = decode(engine, prompt, max_tokens=40, drafter=self_draft, costs=eager(), trace=True)
        assert_same_greedy(plain, r.tokens, "self draft")
        check_trace(r)
        # The draft is the target: its single steps and the verify batch part only at near-ties.
        assert r.drafted > 0 and r.drafted - r.accepted <= near_ties(plain)


def test_the_draft_drafts_on_the_targets_sequence_and_keeps_the_full_prompt(engine, prompts, plain_outputs,
                                                                           self_draft):
    """A short prompt (its own KV sequence in the target) drafts on the same sequence in the
    draft's context: the full prompt the draft read stays, so going back there reads nothing."""
    full, short = prompts[0], prompts[1][-40:]
    self_draft.ms_per_token = 0.0
    decode(engine, full, max_tokens=8, drafter=self_draft, costs=eager())
    assert self_draft.engine.held(FULL)[:len(full)] == list(full)
    r = decode(engine, short, max_tokens=8, drafter=self_draft, costs=eager(), seq=SHORT)
    assert self_draft.engine.held(SHORT)[:len(short)] == list(short) and r.drafted > 0
    assert self_draft.engine.held(FULL)[:len(full)] == list(full)  # not evicted by the short prompt
    again = decode(engine, full, max_tokens=40, drafter=self_draft, costs=eager())
    assert_same_greedy(plain_outputs[0], again.tokens, "self draft, back at the full prompt")


def test_the_drafts_background_read_of_a_full_prompt_makes_room_beside_its_short_ones(self_draft):
    """The target's pending full prompt, read into the draft while idle, fits the draft's cells:
    short prompts it drafted on give way, as they do in the target."""
    eng = self_draft.engine
    text = Path(argparse.__file__).read_text()
    short, full = eng.tokenize(text[:4000])[:600], eng.tokenize(text[4000:])[:eng.n_ctx - 300]
    self_draft.begin(prompt=short, seq=SHORT)
    assert eng.held(SHORT) == short
    self_draft.read(full, threading.Event(), chunk=256)
    assert eng.held(FULL) == full[:-1] and eng.held(SHORT) == []  # its last token is read by the request


def test_auto_uses_the_draft_model_when_lookup_has_nothing(engine, prompts, plain_outputs, self_draft):
    auto = Auto(PromptLookup(), self_draft)
    drafts_before = self_draft.drafts
    for prompt, plain in zip(prompts[:2], plain_outputs[:2], strict=True):
        self_draft.ms_per_token = 0.0
        r = decode(engine, prompt, max_tokens=40, drafter=auto, costs=eager())
        assert_same_greedy(plain, r.tokens, "auto")
    assert self_draft.drafts > drafts_before


def test_measured_costs_keep_a_self_draft_from_drafting(engine, prompts, self_draft, costs):
    # Drafting with the target itself costs a full decode per token: never worth it. The
    # profile alone, without the drift earlier tests taught it (their steps ran at other
    # depths and loads than this draft is priced at).
    profiled = dataclasses.replace(costs, scale={}, seen={})
    self_draft.ms_per_token = profiled.cost(1)
    r = decode(engine, prompts[0], max_tokens=16, drafter=self_draft, costs=profiled)
    assert r.drafted == 0


def test_a_draft_models_acceptance_is_learned_per_band_of_its_own_confidence(engine, self_draft):
    """On the repeated line every token is in the surest band (the premise, asserted): a draft
    drafts there while that band is accepted, and not at all once it is known to be rejected,
    however good the other bands are."""
    engine.reset()
    prompt = engine.tokenize(REPEATED)
    plain = decode(engine, prompt, max_tokens=24, trace=True)
    assert min(plain.probs) >= SURE_BANDS[0], "premise: the line is certain, every token in the surest band"
    costs = CostModel({1: 10.0, 2: 14.0, 32: 134.0})
    try:
        for surest, others, drafts in ((1.0, 0.0, True), (0.0, 1.0, False)):
            self_draft.acceptance = Acceptance({f"model/{i}": surest if i == 0 else others
                                                for i in range(len(SURE_BANDS))}, weight=1000.0)
            self_draft.drafts, self_draft.idle, self_draft.ms_per_token, self_draft.looks = PROBES, 0, 0.5, Looks()
            engine.truncate(len(prompt))  # decoded, not replayed from the rows the run before kept
            r = decode(engine, prompt, max_tokens=24, drafter=self_draft, costs=costs)
            assert (r.drafted > 0) == drafts and r.accepted == r.drafted
            assert_same_greedy(plain, r.tokens, f"self draft, surest band accepted at {surest}")
    finally:
        self_draft.acceptance = Acceptance({f"model/{i}": 0.5 for i in range(len(SURE_BANDS))})


def test_a_one_token_draft_is_still_the_cost_models_choice(engine, self_draft):
    """Near a suggestion's end only one token may be drafted: it is proposed only if it pays,
    like a longer draft (on the repeated line every token is in the surest band, known here to
    be rejected)."""
    seq = np.array(engine.tokenize(REPEATED), dtype=np.int32)
    self_draft.acceptance = Acceptance({f"model/{i}": 0.0 if i == 0 else 1.0 for i in range(len(SURE_BANDS))},
                                       weight=1000.0)
    self_draft.drafts, self_draft.idle, self_draft.ms_per_token, self_draft.looks = PROBES, 0, 0.5, Looks()
    try:
        assert self_draft.propose(seq, 1, CostModel({1: 10.0, 2: 14.0, 32: 134.0})) is None
    finally:
        self_draft.acceptance = Acceptance({f"model/{i}": 0.5 for i in range(len(SURE_BANDS))})


def test_a_draft_that_stopped_drafting_is_tried_again_with_one_token(engine, prompts, plain_outputs, self_draft):
    """A bad start must not silence a draft for good: after REPROBE steps without a draft it
    drafts one token, if a draft that good would pay at all; not while it would first read
    what the target emitted meanwhile (more than a token gains), but at a generation's start."""
    costs = CostModel({1: 10.0, 2: 14.0, 32: 134.0})  # a draft of p 0.9 pays one token; of p 0.01 none
    own_costs, self_draft.costs = self_draft.costs, CostModel({1: 1.0}, read=ReadRate(2.0, 0.0))  # 2 ms a token read
    self_draft.acceptance = Acceptance({f"model/{i}": 0.01 for i in range(len(SURE_BANDS))}, weight=300.0)
    self_draft.drafts, self_draft.idle, self_draft.ms_per_token, self_draft.looks = PROBES, 0, 1.0, Looks()
    try:
        r = decode(engine, prompts[0], max_tokens=40, drafter=self_draft, costs=costs)
        assert len(r.tokens) > REPROBE + 1, "premise: enough steps for one try"
        assert r.drafted == 0  # REPROBE steps behind: catching up would cost more than it gains
        assert self_draft.idle > REPROBE
        r = decode(engine, prompts[1], max_tokens=40, drafter=self_draft, costs=costs)
        assert r.drafted == 1 and r.spec_steps == 1
        assert_same_greedy(plain_outputs[1], r.tokens, "a draft tried again")
    finally:
        self_draft.costs = own_costs
        self_draft.acceptance = Acceptance({f"model/{i}": 0.5 for i in range(len(SURE_BANDS))})


def test_draft_with_another_vocabulary_is_a_clear_error(engine, gemma_path):
    other = Engine(gemma_path, n_ctx=512)
    try:
        with pytest.raises(ModelError, match="another vocabulary.*262144 tokens vs the target's 49152"):
            check_same_vocab(engine, other)
        with pytest.raises(ModelError, match="another vocabulary"):
            DraftModel(other, engine, CostModel({1: 1.0}))
    finally:
        other.close()


def test_same_vocabulary_passes_the_check(engine, self_draft):
    check_same_vocab(engine, self_draft.engine)


def test_models_that_want_bos_get_it_and_an_empty_file_is_a_prompt(engine, gemma_path):
    from prompts import build_prompt, family_for, prompt_tokens

    gemma = Engine(gemma_path, n_ctx=512)
    try:
        bos = gemma.bos_for_prompt()
        assert bos is not None
        assert prompt_tokens(gemma, build_prompt(family_for(gemma), "", "", "a.py"), 64) == [bos]
        ids = prompt_tokens(gemma, build_prompt(family_for(gemma), "x = 1\n", "", "a.py"), 64)
        assert ids[0] == bos and len(ids) > 1
        assert engine.bos_for_prompt() is None  # SmolLM2 is trained without one
    finally:
        gemma.close()


def test_a_new_draft_model_is_tried_before_it_is_judged(engine, model_path):
    """At the prior of a doubted token a cheap draft never pays, so it would never be measured
    there: its first steps are tried as a good draft of the family would be, then its measured
    acceptance rules."""
    costs = CostModel({1: 10.0, 2: 14.0, 4: 22.0, 8: 38.0, 32: 140.0})  # a verified row: 0.4 of a step
    draft = DraftModel(Engine(model_path, n_ctx=512), engine, CostModel({1: 2.0}))  # a fifth of a step
    try:
        seq = np.array(engine.tokenize("def mean(values):\n    return sum(values) / len("), dtype=np.int32)
        assert costs.choose([draft.acceptance.p("model/2")] * 4, draft.ms_per_token) == 0
        draft.begin(prompt=seq.tolist())  # as a generation starts: its context holds the prompt
        first = draft.propose(seq, 16, costs)
        assert first is not None and 1 <= len(first.tokens) <= 4
        for _ in range(PROBES):
            draft.feedback(first, 0)  # every draft rejected: its first token's band learns so
        assert draft.propose(seq, 16, costs) is None
    finally:
        draft.engine.close()
