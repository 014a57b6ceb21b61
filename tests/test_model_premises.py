"""What the end-to-end tests count on the model writing, checked on the real model.

A test that needs a long generation uses a text whose greedy continuation is certain: at every
token the model's choice leads its runner-up by a margin far wider than the rounding that
another CPU's kernels bring (docs/testing.md). If a new model or build breaks that, this says
so by name, instead of a cancellation test failing for no visible reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from decode_helpers import decode
from editor_sample import PICTURE, PICTURE_PATH, PICTURE_SUGGESTION, PICTURE_TYPED
from lsp_helpers import REPEATED

from lsp_server.settings import Settings
from prompts import build_prompt, family_for, prompt_tokens
from prompts.heal import heal_split
from speculative.convert import weights_path
from speculative.engine import Engine
from speculative.heal import Heal, PieceIndex

MARGIN = 2.0  # logits between the chosen token and the next, at every token


@pytest.fixture(scope="module")
def served(model_path):
    """The weights the server runs (model.weights: the embedded model converted to Q4_0), which
    round differently from the shipped file: a line certain on one may end otherwise on the other."""
    eng = Engine(weights_path(model_path, Settings().model.weights), n_ctx=2048)
    yield eng
    eng.close()


def test_the_repeated_line_goes_on_for_hundreds_of_tokens_each_by_a_wide_margin(engine, served):
    for e in (engine, served):  # the shipped weights (engine-level tests) and the server's
        e.reset()
        r = decode(e, e.tokenize(REPEATED), max_tokens=420, trace=True)
        assert r.stop_reason == "max_tokens" and len(r.tokens) == 420
        assert set(r.text.replace(" ", "").split(",")) <= {"1", ""}
        assert min(t["gap"] for t in r.trace) >= MARGIN


LINE_MARGIN = 1.0  # twice the near-tie gap (bench/divergence.py GAP_TIE) at which kernels were seen to differ


def _greedy_margins(engine, prompt: list[int], heal: Heal, max_tokens: int) -> tuple[str, list[float], list[float]]:
    """Greedy decoding as the server does it (the healed text first, among the tokens that
    reproduce it), with each step's margin between the chosen token and the next one allowed,
    and each chosen token's probability."""
    engine.reset()
    (row,) = engine.eval(prompt, want_rows=[len(prompt) - 1])
    tokens, margins, probs = [], [], []
    for _ in range(max_tokens):
        allowed = heal.allowed()
        ids = allowed if allowed is not None else np.arange(len(row))
        top = ids[np.argsort(row[ids])[::-1][:2]]
        margins.append(float(row[top[0]] - row[top[1]]) if len(top) > 1 else np.inf)  # one way to spell it
        tokens.append(int(top[0]))
        probs.append(float(1 / np.exp(row[ids] - row[top[0]]).sum()))
        heal.advance(int(top[0]))
        if "\n" in engine.detokenize(tokens):
            break
        (row,) = engine.eval([int(top[0])], want_rows=[0])
    return engine.detokenize(tokens), margins, probs


def test_the_readme_picture_suggestion_is_certain(served):
    """The README's first picture, on the prompt the picture's server builds: the typed `sum` is
    healed (regenerated among the tokens that spell it), then the line goes on and ends; every
    choice, the line's end included, leads the next allowed one widely."""
    head, healed = heal_split(PICTURE + PICTURE_TYPED)
    prompt = prompt_tokens(served, build_prompt(family_for(served), head, "", str(PICTURE_PATH)), 1024)
    pieces = served.pieces()
    text, margins, probs = _greedy_margins(served, prompt, Heal(PieceIndex(pieces), pieces, healed.encode()), 24)
    assert text.split("\n")[0] == healed + PICTURE_SUGGESTION and "\n" in text, text
    assert min(margins) >= LINE_MARGIN, margins
    # Sure enough that completion.minConfidence (0.4) cuts nothing of the line.
    assert min(probs[:-1]) >= Settings().completion.min_confidence + 0.1, probs
