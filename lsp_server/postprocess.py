"""Pure clean-up of raw model text into what the editor shows."""

from __future__ import annotations

from dataclasses import dataclass

CLOSERS = set(")]}")


@dataclass(frozen=True)
class Suggestion:
    text: str
    replace_chars: int = 0  # characters after the cursor that the text replaces (closing brackets)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def only_closers(line_suffix: str) -> bool:
    rest = line_suffix.strip()
    return bool(rest) and all(c in CLOSERS for c in rest)


def wants_single_line(line_suffix: str, multiline: str = "auto") -> bool:
    """Single line when the cursor is mid-line (closing brackets aside) or multiline is off."""
    if multiline == "never":
        return True
    if multiline == "always":
        return False
    return bool(line_suffix.strip()) and not only_closers(line_suffix)


def drop_repeated_lines(lines: list[str]) -> list[str]:
    """Cut where the model starts looping: a non-blank line that equals the one before it."""
    kept: list[str] = []
    for ln in lines:
        if kept and ln.strip() and ln == kept[-1]:
            break
        kept.append(ln)
    return kept


def postprocess(text: str, line_suffix: str, next_lines: list[str], line_prefix: str = "",
                multiline: str = "auto", markdown: bool = False) -> Suggestion:
    """Trim a raw completion: single line mid-line, no repeat of the suffix or the lines
    below, no looping lines, stay in the cursor's indentation scope, replace trailing
    closing brackets that the suggestion retypes, never whitespace-only, and no markdown
    code fence in a code file (chat-tuned models such as SmolLM2-Instruct start one)."""
    if not markdown and text.lstrip().startswith("```"):
        return Suggestion("")
    replace = 0
    if wants_single_line(line_suffix, multiline):
        text = text.split("\n", 1)[0]
        rest = line_suffix.strip()
        if rest and text.rstrip().endswith(rest):  # do not re-type what stands after the cursor
            text = text.rstrip()[: -len(rest)]
    else:
        lines = drop_repeated_lines(text.split("\n"))
        scope = _indent(line_prefix + lines[0]) if (line_prefix + lines[0]).strip() else _indent(line_prefix)
        nxt = {ln.strip() for ln in next_lines[:3] if ln.strip()}
        kept: list[str] = []
        for i, ln in enumerate(lines):
            if i and ln.strip() and ln.strip() in nxt:
                break  # the model started repeating the code below the cursor
            if i and ln.strip() and _indent(ln) < scope:
                break  # left the block the cursor is in
            kept.append(ln)
        text = "\n".join(kept).rstrip()
        if only_closers(line_suffix):
            first = text.split("\n", 1)[0]
            if first.rstrip().endswith(line_suffix.strip()):
                text, replace = first.rstrip(), len(line_suffix)
            else:
                text = first
    return Suggestion(text, replace) if text.strip() else Suggestion("")


def for_cursor(text: str, prefix: str, suffix: str, path: str, multiline: str = "auto") -> Suggestion:
    """A raw completion shaped for a cursor between `prefix` and `suffix` of the file at `path`:
    what the editor shows (and `specfill complete` prints)."""
    line_suffix, _, below = suffix.partition("\n")
    return postprocess(text, line_suffix, below.split("\n"), prefix.rsplit("\n", 1)[-1], multiline,
                       path.lower().endswith((".md", ".markdown")))
