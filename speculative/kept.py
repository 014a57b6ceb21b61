"""What a sequence's last prefill and generation left behind, to be read again for free.

Keystrokes within a word ask with the same prompt (healing backs up before the word), and
each used to decode again what the one before had decoded. A sequence now keeps its last
prompt's logits and, for each generated token still in its KV cache, the target's logits
row after it. The next generation from that prompt replays them: a kept row gives the
target's choice under that generation's own constraint, so a generation the next keystroke
superseded is carried on, not begun again, and the output is what decoding would give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

KEPT_ROW_BYTES = 8 << 20  # logits rows kept per sequence, at most: a few dozen rows of a small vocabulary


@dataclass
class Kept:
    """A sequence's last prompt, its last token's logits, and the generated tokens the
    sequence holds after it (`tokens[i]` at position len(prompt) + i) with the row after each."""

    prompt: list[int]
    logits: np.ndarray
    max_rows: int
    tokens: list[int] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)

    def cut(self, n_held: int) -> bool:
        """The sequence now holds only its first `n_held` tokens; False when the prompt is gone."""
        if n_held < len(self.prompt):
            return False
        del self.tokens[n_held - len(self.prompt):], self.rows[n_held - len(self.prompt):]
        return True

    def add(self, held: Sequence[int], tokens: Sequence[int], rows: Sequence[np.ndarray]) -> None:
        """`tokens`, just appended to the sequence (which now holds `held`), with the row after
        each; kept only when they follow what is kept, up to `max_rows`."""
        end = len(self.prompt) + len(self.tokens)
        if end + len(tokens) != len(held) or list(held[end:]) != list(tokens):
            return
        room = self.max_rows - len(self.rows)
        self.tokens += list(tokens)[:room]
        self.rows += list(rows[:room])


class Replay:
    """A generation's cursor through the kept tokens: the row after the next one, while the
    target's choice is that token."""

    def __init__(self, tokens: Sequence[int], rows: Sequence[np.ndarray]) -> None:
        self.tokens, self.rows, self.at = tokens, rows, 0  # Engine.after's copies

    def take(self, token: int) -> np.ndarray | None:
        if self.at < len(self.tokens) and self.tokens[self.at] == token:
            self.at += 1
            return self.rows[self.at - 1]
        return None
