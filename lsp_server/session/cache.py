"""Type-through cache: when the user types what the suggestion said, answer without the model.

Pure bookkeeping: one entry per document, the text before and after the cursor when the
suggestion was made and the suggestion's raw text (which a background generation may
still be extending).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Entry:
    prefix: str
    suffix: str
    text: str  # raw model text after `prefix`, possibly still growing
    done: bool = False
    cut: bool = False  # its generation was stopped before its end: the text may be a stub
    until: int | None = None  # where the model ended the shown suggestion: typed less, see no further


class TypeThroughCache:
    def __init__(self, max_docs: int = 64) -> None:
        self._entries: dict[str, Entry] = {}
        self.max_docs = max_docs

    def put(self, uri: str, prefix: str, suffix: str, text: str, done: bool = True) -> Entry:
        if uri not in self._entries and len(self._entries) >= self.max_docs:
            self._entries.pop(next(iter(self._entries)))
        entry = Entry(prefix, suffix, text, done)
        self._entries[uri] = entry
        return entry

    def lookup(self, uri: str, prefix: str, suffix: str) -> str | None:
        """The rest of the cached suggestion if `prefix` is its prefix plus typed text that
        the suggestion starts with, and the text after the cursor is unchanged; else None."""
        entry = self._entries.get(uri)
        if entry is None or suffix != entry.suffix or not prefix.startswith(entry.prefix):
            return None
        typed = prefix[len(entry.prefix):]
        if not entry.text.startswith(typed):
            return None
        end = entry.until if entry.until is not None and len(typed) < entry.until else None
        rest = entry.text[len(typed):end]
        return rest if rest.strip() else None

    def current(self, uri: str) -> Entry | None:
        return self._entries.get(uri)

    def drop(self, uri: str) -> None:
        self._entries.pop(uri, None)
