"""Pure clean-up of raw model text into what the editor shows."""

from __future__ import annotations


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def postprocess(text: str, line_suffix: str, next_lines: list[str], line_prefix: str = "") -> str:
    """Trim a raw completion: single line mid-line, no suffix repeat, stay in the indentation
    scope of the cursor's line, never whitespace-only."""
    if line_suffix.strip():
        text = text.split("\n", 1)[0]
        # Do not re-type what already stands after the cursor.
        rest = line_suffix.strip()
        if rest and text.rstrip().endswith(rest):
            text = text.rstrip()[: -len(rest)]
    else:
        lines = text.split("\n")
        scope = _indent(line_prefix + lines[0]) if (line_prefix + lines[0]).strip() else 0
        nxt = {ln.strip() for ln in next_lines[:3] if ln.strip()}
        kept = []
        for ln in lines:
            if kept and ln.strip() and ln.strip() in nxt:
                break  # the model started repeating the code below the cursor
            if kept and ln.strip() and _indent(ln) < scope:
                break  # left the block the cursor is in
            kept.append(ln)
        text = "\n".join(kept).rstrip()
    return text if text.strip() else ""
