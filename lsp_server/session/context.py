"""What a session gathers from the editor besides the place being completed: the open
documents by when they were last touched, chunks around recent edits (`chunks`), and the
workspace index (`workspace`); `other_documents` turns them into a request's context."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from lsp_server.session.chunks import ChunkRing
from lsp_server.session.controls import excluded
from lsp_server.session.workspace import WorkspaceIndex
from lsp_server.settings import Settings
from prompts import ContextFile

CHUNK_REGION = 8  # lines: an edit this far from the last chunk's makes a new chunk
CHUNK_REFRESH_S = 2.0  # else the chunk is refreshed at most this often


class EditorContext:
    """One session's context sources; all on the event loop's thread."""

    def __init__(self, documents: Callable[[], Mapping[str, Any]]) -> None:
        self._documents = documents  # uri -> pygls TextDocument: the session's open documents
        self.recent: dict[str, float] = {}  # uri -> last open/edit time
        self.index: WorkspaceIndex | None = None
        self.chunks = ChunkRing()  # places recently edited, in any document
        self._chunked: dict[str, tuple[int | None, float]] = {}  # uri -> (region, time) of its last chunk

    def touched(self, uri: str, line: int) -> None:
        """A document was opened or edited at `line`."""
        self.recent[uri] = time.monotonic()
        self.note_edit(uri, line)

    def forget(self, uri: str) -> None:
        self.recent.pop(uri, None)

    def other_documents(self, uri: str, near: str, settings: Settings) -> tuple[ContextFile, ...]:
        """Context for a request in `uri`, most useful first: chunks around recent edits in
        other documents (the prompt takes the first), the other open documents, most recently
        edited first, then the workspace files sharing most identifiers with the text `near`
        the cursor (prompt lookup copies from these too). Files context.exclude names are left
        out, whatever the engine."""
        docs = self._documents()
        out: list[ContextFile] = []
        kept_out = settings.context.exclude
        if settings.context.open_files:
            this = docs[uri].path if uri in docs else uri
            out += [ContextFile(c.path, c.text) for c in self.chunks.recent(exclude_path=this)]
            order = sorted((u for u in self.recent if u != uri and u in docs), key=self.recent.__getitem__,
                           reverse=True)
            out += [ContextFile(docs[u].path or u, docs[u].source) for u in order]
        if settings.context.workspace and self.index is not None:
            this = docs[uri].path if uri in docs else ""
            related = self.index.related(this, near, n=2, exclude=[c.path for c in out],
                                         skip=lambda p: excluded(p, kept_out))
            out += [ContextFile(str(f.path), f.text) for f in related]
        return tuple(c for c in out if not excluded(c.path, kept_out))

    def note_edit(self, uri: str, line: int) -> None:
        """Keep the ring's chunk of this place current: on a new region, or every few seconds."""
        doc = self._documents().get(uri)
        now = time.monotonic()
        region, last = self._chunked.get(uri, (None, 0.0))
        if doc is None or (region == line // CHUNK_REGION and now - last < CHUNK_REFRESH_S):
            return
        self._chunked[uri] = (line // CHUNK_REGION, now)
        self.chunks.add(doc.path or uri, doc.source, line)  # the path, as prompts name files

    def update_index(self, roots: list[str]) -> None:
        """Start, restart or stop the workspace indexer to index `roots` (none: stopped)."""
        if self.index is not None and [str(r) for r in self.index.roots] == [os.path.realpath(r) for r in roots]:
            return
        if self.index is not None:
            self.index.stop()
            self.index = None
        if roots:
            self.index = WorkspaceIndex(roots)
            self.index.start()
