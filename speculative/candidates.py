"""Alternative suggestions for an explicit request: branch from the prompt's next-best first
tokens and decode the branches greedily side by side, one llama.cpp sequence each, sharing
the prompt's KV cells. n branches cost one batched decode a token, not n cold runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from speculative.heal import Heal
from speculative.output import Output
from speculative.seqs import FIRST_BRANCH, FULL, MAX_SEQS


def branch(engine, prompt: Sequence[int], n: int, max_tokens: int, stop: Sequence[str] = (),
           exclude: Sequence[int] = (), cancel: threading.Event | None = None, heal: Heal | None = None,
           seq: int = FULL) -> list[tuple[int, str]]:
    """Up to `n` continuations of `prompt` as (first token, text), each starting with a different
    first token among the most likely (not in `exclude`: the greedy suggestion's first token).
    With `heal`, first tokens are those that reproduce all of the healed text."""
    n = min(n, MAX_SEQS - FIRST_BRANCH)
    if n <= 0:
        return []
    # Reuses the cached prompt; what the greedy generation left after it stays for the next one.
    logits, _ = engine.prefill(prompt, cancel, seq, keep_after=True)
    base = len(prompt)
    healed = heal.rest if heal is not None else b""
    pieces = engine.token_bytes
    allowed = heal.allowed() if heal is not None else None
    ranked = np.argsort(logits)[::-1] if allowed is None else allowed[np.argsort(logits[allowed])[::-1]]
    firsts = [int(t) for t in ranked[: n + len(exclude) + 8 if heal is None else None]
              if int(t) not in exclude and not engine.is_eog(int(t)) and pieces(int(t)).startswith(healed)][:n]
    outs = [Output(pieces, stop, max_tokens, skip=len(healed)) for _ in firsts]
    seqs = list(range(FIRST_BRANCH, FIRST_BRANCH + len(firsts)))
    for s in seqs:
        engine.branch_seq(s, base, source=seq)
    live = [i for i, tok in enumerate(firsts) if outs[i].emit(tok, False)]
    pending = {i: firsts[i] for i in live}
    pos = base
    try:
        while live and pos + 1 < engine.n_ctx and not (cancel is not None and cancel.is_set()):
            rows = engine.eval_seqs([(pending[i], pos, seqs[i]) for i in live])
            pos += 1
            still = []
            for i, row in zip(live, rows, strict=True):
                tok = int(np.argmax(row))
                if outs[i].emit(tok, engine.is_eog(tok)):
                    pending[i] = tok
                    still.append(i)
            live = still
    finally:
        for s in seqs:
            engine.drop(s)
    return [(tok, o.text) for tok, o in zip(firsts, outs, strict=True)]
