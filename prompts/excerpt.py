"""Which part of a big file goes into the prompt: an excerpt around the cursor whose start
stays put while the user types, so the KV cache of the prompt can be reused keystroke after
keystroke (a start that slid with every character would force a cold prefill each time)."""

from __future__ import annotations

from collections.abc import Sequence

from prompts.templates import ContextFile

# The settings' defaults (context.prefixChars, suffixChars, otherFilesChars): less of either
# saved no more keys and made p99 or the first suggestion slower (docs/context.md).
PREFIX_CHARS = 4000
SUFFIX_CHARS = 2000
OTHER_FILES_CHARS = 2000
OTHER_FILES = 2  # other files in a prompt: past the two most useful, a file mostly took room from them
STEP = 2048  # the excerpt's start moves in jumps of this many characters


def prefix_excerpt(prefix: str, max_chars: int = PREFIX_CHARS, step: int | None = None) -> str:
    """The end of `prefix`, at most max_chars long, starting at a line start that only moves
    when the cursor has advanced about `step` characters (at most half of max_chars, so at
    least half of it is kept)."""
    if len(prefix) <= max_chars:
        return prefix
    step = step or max(1, min(STEP, max_chars // 2))
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


def other_files_excerpt(others: Sequence[ContextFile], max_chars: int = OTHER_FILES_CHARS,
                        files: int = OTHER_FILES) -> list[ContextFile]:
    """The first `files` of `others` (the most useful first), an equal share of `max_chars`
    each, from the end of each text; none when the share is empty."""
    share = max_chars // files
    return [ContextFile(o.path, o.text[-share:]) for o in others[:files]] if share > 0 else []
