"""Which part of a big file goes into the prompt: an excerpt around the cursor whose start
stays put while the user types, so the KV cache of the prompt can be reused keystroke after
keystroke (a start that slid with every character would force a cold prefill each time)."""

from __future__ import annotations

PREFIX_CHARS = 4000  # more measured no better (bench-lsp); docs/performance.md
SUFFIX_CHARS = 2000
STEP = 2048  # the excerpt's start moves in jumps of this many characters


def prefix_excerpt(prefix: str, max_chars: int = PREFIX_CHARS, step: int = STEP) -> str:
    """The end of `prefix`, at most max_chars long, starting at a line start that only moves
    when the cursor has advanced about `step` characters."""
    if len(prefix) <= max_chars:
        return prefix
    start = len(prefix) - max_chars
    start = -(-start // step) * step  # round up to the step grid: stable while typing
    nl = prefix.find("\n", start)
    return prefix[nl + 1:] if 0 <= nl < len(prefix) - 1 else prefix[start:]


def suffix_excerpt(suffix: str, max_chars: int = SUFFIX_CHARS) -> str:
    """The start of `suffix`, ending at a line end when one is near."""
    if len(suffix) <= max_chars:
        return suffix
    cut = suffix[:max_chars]
    nl = cut.rfind("\n")
    return cut[: nl + 1] if nl > max_chars // 2 else cut


def nearest_lines(prefix: str, max_chars: int) -> str:
    """The lines nearest the cursor for a prompt read at once (the full one is read meanwhile):
    at most max_chars, from a line start that stays put while the user types on."""
    return prefix_excerpt(prefix, max_chars, step=max(32, max_chars // 4))
