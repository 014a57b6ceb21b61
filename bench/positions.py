"""LSP positions from a client's side: code point offsets to UTF-16 line/character."""

from __future__ import annotations

from lsprotocol import types


def utf16_position(text: str, offset: int) -> types.Position:
    """The LSP position (UTF-16 columns) of code point `offset`; lines end at \\n or \\r\\n."""
    before = text[:offset]
    line = before.count("\n")
    start = before.rfind("\n") + 1
    return types.Position(line=line, character=len(before[start:].encode("utf-16-le")) // 2)
