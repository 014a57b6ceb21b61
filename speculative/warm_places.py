"""Several places kept warm: the full prompt in the engine's FULL sequence, and the last few
others copied out to memory (llama_state_seq_get_data), most recent first.

Before the full prompt's sequence is overwritten by a prompt of another place, its cache is saved;
a prompt that a saved cache serves better than the live one loads that cache back (a copy of
a few MB) instead of reading the prompt again (seconds). Bounded by count and by bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from speculative.engine import Engine, SavedSeq, common_prefix
from speculative.seqs import FULL

# tokens: fewer are read again in one step (a ubatch); a larger one, even of a small file,
# would be read again at each keystroke of a window typing beside another.
MIN_SAVE = 32


# Enough for a few places besides the live one, within the server's memory limit (the model +
# 250 MB at n_ctx 4096) with everything else it holds: docs/performance.md has the budget, and
# `specfill bench-lsp [--workspace DIR]` prints the peak.
MAX_BYTES = 40 << 20


class WarmPlaces:
    def __init__(self, keep: int = 4, max_bytes: int = MAX_BYTES) -> None:
        self.keep, self.max_bytes = keep, max_bytes
        self.saved: list[SavedSeq] = []  # most recent first
        self.loads = 0  # caches loaded back instead of read again
        self.saves = 0

    def __len__(self) -> int:
        return len(self.saved)

    @property
    def bytes(self) -> int:
        return sum(len(s.data) for s in self.saved)

    def _save_live(self, engine: Engine, reserve: int = 0) -> None:
        """Copy the live cache out, the oldest copies dropped first to make room: the copies
        (and `reserve`, one about to be loaded back) never exceed max_bytes, even while made."""
        live = engine.held(FULL)
        if len(live) < MIN_SAVE:
            return
        # A saved cache that the live one extends is superseded by it.
        self.saved = [s for s in self.saved if common_prefix(s.tokens, live) < len(s.tokens)]
        size = engine.saved_size(FULL) + reserve
        while self.saved and (len(self.saved) >= self.keep or self.bytes + size > self.max_bytes):
            self.saved.pop()
        self.saved.insert(0, engine.save_seq(FULL))
        self.saves += 1

    def prepare(self, engine: Engine, prompt: Sequence[int]) -> int:
        """Make the full prompt's sequence the best start for `prompt`; the tokens it can reuse.
        The live cache is saved first when serving `prompt` would throw much of it away."""
        held = engine.held(FULL)
        live = common_prefix(held, prompt)
        best, best_n = None, live
        for s in self.saved:
            n = common_prefix(s.tokens, prompt)
            if n > best_n:
                best, best_n = s, n
        if best is not None:
            self.saved = [s for s in self.saved if s is not best]
            self._save_live(engine, reserve=len(best.data))
            engine.load_seq(best, FULL)
            self.loads += 1
            return best_n
        if len(held) - live > MIN_SAVE:  # another place: keep it before it is overwritten
            self._save_live(engine)
        return live

    def clear(self) -> None:
        self.saved.clear()
