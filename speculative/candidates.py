"""Alternative suggestions for an explicit request: branch from the prompt's next-best first
tokens and decode the branches greedily side by side, one llama.cpp sequence each, sharing
the prompt's KV cells. n branches cost one batched decode a token, not n cold runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from speculative.decode import _Output
from speculative.engine import MAX_SEQS


def branch(engine, prompt: Sequence[int], n: int, max_tokens: int, stop: Sequence[str] = (),
           exclude: Sequence[int] = (), cancel: threading.Event | None = None) -> list[tuple[int, str]]:
    """Up to `n` continuations of `prompt` as (first token, text), each starting with a different
    first token among the most likely (not in `exclude`: the greedy suggestion's first token)."""
    n = min(n, MAX_SEQS - 1)
    if n <= 0:
        return []
    logits, _ = engine.prefill(prompt, cancel)  # reuses the cached prompt: one token evaluated
    base = len(engine.cached)
    firsts = [int(t) for t in np.argsort(logits)[::-1][: n + len(exclude) + 8]
              if int(t) not in exclude and not engine.is_eog(int(t))][:n]
    outs = [_Output(engine.token_bytes, stop, max_tokens, None) for _ in firsts]
    seqs = list(range(1, len(firsts) + 1))
    for seq in seqs:
        engine.branch_seq(seq, base)
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
        for seq in seqs:
            engine.drop_seq(seq)
    return [(tok, o.text) for tok, o in zip(firsts, outs, strict=True)]
