"""Emitted tokens and their text: stop strings, the token limit and confidence decide when
generation ends."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """`text` cut before the first stop string it contains, and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


class Output:
    """Emitted tokens and their text; `emit` says when generation must stop.

    `skip` bytes at the start of the output are not text of the suggestion: token healing
    regenerates the end of what the user typed, and only what follows it is the suggestion
    (and counts against max_tokens). A token of the suggestion whose probability is below
    `min_confidence` is not taken: generation ends before it, with the part of it the model is
    sure of (see decode.Picker).
    """

    def __init__(self, token_bytes: Callable[[int], bytes], stop: Sequence[str], max_tokens: int,
                 on_text: Callable[[str], None] | None = None, skip: int = 0, min_confidence: float = 0.0) -> None:
        self.token_bytes, self.stop, self.max_tokens, self.on_text = token_bytes, stop, max_tokens, on_text
        self.skip, self.min_confidence = skip, min_confidence
        self.tokens: list[int] = []
        self.probs: list[float] = []
        self.healing = 0  # tokens that only reproduced healed text
        self._bytes = bytearray()
        self.text = ""
        self.reason: str | None = None

    def room(self) -> int:
        """Suggestion tokens that may still be emitted."""
        return self.max_tokens - (len(self.tokens) - self.healing)

    def emit(self, tok: int, is_eog: bool, prob: float = 1.0, sure: int = -1) -> bool:
        """Append one token; False once generation must stop. A token below min_confidence is
        not taken, but its first `sure` bytes are: the part of it the model is sure of."""
        if is_eog:
            self.reason = "eog"
            return False
        piece = self.token_bytes(tok)
        if len(self._bytes) + len(piece) <= self.skip:
            self.healing += 1
        elif prob < self.min_confidence:
            self.reason = "confidence"  # the suggestion ends before a token the model doubts
            if sure > 0:
                self._extend(piece[:sure], partial=True)
            return False
        self.tokens.append(tok)
        self.probs.append(prob)
        self._extend(piece)
        if self.reason is None and self.room() <= 0:
            self.reason = "max_tokens"
        return self.reason is None

    def _extend(self, data: bytes, partial: bool = False) -> None:
        self._bytes += data
        new, hit = cut_at_stop(self._bytes[self.skip:].decode("utf-8", errors="replace"), self.stop)
        if hit:
            self.reason = "stop"
        if partial:  # a token's part may end inside a character
            new = new.rstrip("\ufffd")
        if self.on_text and new != self.text and not new.endswith("\ufffd"):
            self.on_text(new)
        self.text = new
