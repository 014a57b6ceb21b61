"""Where token healing backs the prompt up to: a pure function of the text before the cursor.

A cursor in the middle of a word (or a number, an operator, a run of spaces) leaves the
prompt ending in a token the user has not finished: `    retu` tokenizes as `   `, ` ret`,
`u`, and a model asked to go on from there takes `retu` for a whole name. The prompt is cut
before the half-typed run (with the one space that BPE vocabularies glue to a word), and
generation must first reproduce the cut text (speculative/heal.py). The cut never crosses
the start of the cursor's line, so the prompt is stable while the user types within a word.
"""

from __future__ import annotations

import re

# The run the cursor ends in: a word (with one leading space or tab), an operator run (the same),
# or whitespace. \w is Unicode-aware, so `café` is one word.
_RUN = re.compile(r"(?:[ \t]?\w+|[ \t]?[^\w\s]+|[ \t]+)\Z")
MAX_HEAL_CHARS = 32  # a longer run is healed from here on: the constraint stays a few tokens


def heal_split(prefix: str) -> tuple[str, str]:
    """(prompt text, text generation must reproduce first); ("...", "") when nothing is half-typed."""
    line_start = prefix.rfind("\n") + 1
    m = _RUN.search(prefix, line_start)
    if m is None:
        return prefix, ""
    cut = max(m.start(), len(prefix) - MAX_HEAL_CHARS)
    return prefix[:cut], prefix[cut:]
