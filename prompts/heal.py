"""Where token healing backs the prompt up to: a pure function of the text before the cursor.

A cursor in the middle of a word (or a number, an operator, a run of spaces) leaves the
prompt ending in a token the user has not finished: `    retu` tokenizes as `   `, ` ret`,
`u`, and a model asked to go on from there takes `retu` for a whole name. The prompt is cut
before the half-typed run (with the one space that BPE vocabularies glue to a word), and
generation must first reproduce the cut text (speculative/heal.py). The cut never crosses
the start of the cursor's line, so the prompt is stable while the user types within a word.
Of a long run only the last tokens are healed (`heal_last_tokens`): the prompt then grows by a
token every few keystrokes instead of each keystroke generating the whole run again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# The run the cursor ends in: a word (with one leading space or tab), an operator run (the same),
# or whitespace. \w is Unicode-aware, so `café` is one word.
_RUN = re.compile(r"(?:[ \t]?\w+|[ \t]?[^\w\s]+|[ \t]+)\Z")
MAX_HEAL_CHARS = 32  # a longer run is healed from here on: the constraint stays a few tokens
# Of a longer run, the prompt takes all but the last tokens: each healed token is a decode step
# again at every keystroke, while a token in the prompt is read once.
HEAL_TOKENS = 2


def heal_split(prefix: str) -> tuple[str, str]:
    """(prompt text, text generation must reproduce first); ("...", "") when nothing is half-typed."""
    line_start = prefix.rfind("\n") + 1
    m = _RUN.search(prefix, line_start)
    if m is None:
        return prefix, ""
    cut = max(m.start(), len(prefix) - MAX_HEAL_CHARS)
    return prefix[:cut], prefix[cut:]


def heal_last_tokens(kept: str, healed: str, pieces: Callable[[str], Sequence[bytes]],
                     tokens: int = HEAL_TOKENS) -> tuple[str, str]:
    """`heal_split`'s (kept, healed) with the healed run cut to its last `tokens` tokens (as
    `pieces` spells the run), the rest moved to the prompt: a cut at a token boundary of the
    run, so the prompt ends as the tokenizer would end it there."""
    data = healed.encode()
    spelled = list(pieces(healed))
    extra = len(b"".join(spelled)) - len(data)
    if spelled and 0 < extra <= len(spelled[0]) and spelled[0][:extra].isspace():
        spelled[0] = spelled[0][extra:]  # SentencePiece puts a space before the text
    spelled = [p for p in spelled if p]
    if len(spelled) <= tokens or b"".join(spelled) != data:
        return kept, healed
    at = sum(len(p) for p in spelled[:-tokens])
    while at > 0 and data[at] & 0xC0 == 0x80:  # inside a character: back up to its first byte
        at -= 1
    head = data[:at].decode()
    return kept + head, healed[len(head):]
