"""Token healing's constraint: the first tokens generated must reproduce the text the prompt
was backed up over (prompts/heal.py says how far), byte for byte.

A token is allowed while some text remains to reproduce if its bytes start with what remains
(it completes the healed text and goes on) or are a proper prefix of it (it reproduces part).
The target then picks its own most likely allowed token: still the target's greedy choice, so
speculation verifies drafts under the same rule and stays lossless.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence

import numpy as np


class PieceIndex:
    """Token ids ordered by their bytes, to find every token that starts with given bytes."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        # Sorted ids, not (bytes, id) pairs or a dict of lists, which cost many times the memory.
        ids = sorted((t for t, p in enumerate(pieces) if p), key=pieces.__getitem__)  # control tokens: no bytes
        self.keys = [pieces[t] for t in ids]  # the pieces' own bytes objects, not copies
        self.ids = np.array(ids, dtype=np.int32)

    def exact(self, piece: bytes) -> np.ndarray:
        """Tokens whose bytes are exactly `piece`."""
        return self.ids[bisect.bisect_left(self.keys, piece):bisect.bisect_right(self.keys, piece)]

    def starting(self, prefix: bytes) -> np.ndarray:
        """Tokens whose bytes start with `prefix`."""
        lo = bisect.bisect_left(self.keys, prefix)
        after = _successor(prefix)  # keys starting with prefix sort in [prefix, after)
        hi = bisect.bisect_left(self.keys, after) if after is not None else len(self.keys)
        return self.ids[lo:hi]

    @functools.lru_cache(maxsize=64)  # noqa: B019 (one index per model, kept for its life)
    def allowed(self, rest: bytes) -> np.ndarray:
        """Tokens whose bytes start with `rest`, or are a proper prefix of it."""
        parts = [self.starting(rest)]
        parts += [self.exact(rest[:i]) for i in range(1, len(rest))]
        return np.concatenate(parts)


def _successor(prefix: bytes) -> bytes | None:
    """The least byte string greater than every string that starts with `prefix`."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class Heal:
    """The constraint of one generation: what remains to reproduce, advanced token by token."""

    def __init__(self, index: PieceIndex, pieces: Sequence[bytes], text: bytes) -> None:
        self.index, self.pieces, self.rest = index, pieces, text
        self.size = len(text)

    def allowed(self) -> np.ndarray | None:
        """The ids allowed next, or None once the healed text is reproduced."""
        return self.index.allowed(self.rest) if self.rest else None

    def advance(self, token: int) -> None:
        piece = self.pieces[token]
        self.rest = self.rest[len(piece):] if self.rest.startswith(piece) else b""

    def copy(self) -> Heal:
        twin = Heal(self.index, self.pieces, self.rest)
        twin.size = self.size
        return twin

    def feasible(self) -> bool:
        """Whether the text can be reproduced at all (single-byte tokens make it so)."""
        rest = self.rest
        while rest:
            ids = self.index.allowed(rest)
            if ids.size == 0:
                return False
            longest = max((self.pieces[int(t)] for t in ids), key=len)
            rest = rest[len(longest):] if rest.startswith(longest) else b""
        return True
