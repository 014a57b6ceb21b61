"""Recently edited places in other documents, as a ring buffer of fixed-size chunks.

Each edit (or open) records the lines around it; a chunk nearly equal to one already held
(most lines shared) replaces it, so typing in one place keeps one chunk fresh instead of
filling the ring with copies. Pure bookkeeping: the server feeds it, the prompt reads it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Chunk:
    path: str
    start: int  # first line
    text: str

    def lines(self) -> frozenset[str]:
        return frozenset(ln.strip() for ln in self.text.split("\n") if ln.strip())


def similarity(a: Chunk, b: Chunk) -> float:
    """Jaccard similarity of the chunks' non-blank lines."""
    la, lb = a.lines(), b.lines()
    return len(la & lb) / len(la | lb) if la or lb else 1.0


class ChunkRing:
    def __init__(self, capacity: int = 16, lines: int = 32, near_duplicate: float = 0.7) -> None:
        self.capacity, self.size, self.near_duplicate = capacity, lines, near_duplicate
        self._ring: deque[Chunk] = deque()

    def __len__(self) -> int:
        return len(self._ring)

    def add(self, path: str, text: str, line: int) -> Chunk | None:
        """Record the `lines`-line window of `text` around `line`; newest last."""
        all_lines = text.split("\n")
        start = max(0, min(line - self.size // 2, len(all_lines) - self.size))
        chunk = Chunk(path, start, "\n".join(all_lines[start:start + self.size]))
        if not chunk.lines():
            return None
        self._ring = deque(c for c in self._ring if similarity(c, chunk) < self.near_duplicate)
        self._ring.append(chunk)
        while len(self._ring) > self.capacity:
            self._ring.popleft()
        return chunk

    def recent(self, exclude_path: str = "") -> list[Chunk]:
        """Chunks of other documents, most recent first."""
        return [c for c in reversed(self._ring) if c.path != exclude_path]
