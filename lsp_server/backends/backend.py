"""What the worker asks of a completion engine, local or remote, and what it gets back.

The worker runs one engine at a time on its model thread and calls it through
`Backend` without asking which kind it is: `local.LocalBackend` (the model in this
process, with specfill's prompts, healing and speculation) or `remote.RemoteBackend` (a
serving engine). A third backend implements the same few methods.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from lsp_server.settings import Settings
from prompts import ContextFile
from speculative.decode import GenerationResult


@dataclass(frozen=True)
class Request:
    """One completion asked of an engine, at a cursor."""

    prefix: str
    suffix: str
    path: str
    settings: Settings
    cancel: threading.Event
    on_text: Callable[[str], None] | None = None
    others: tuple[ContextFile, ...] = ()  # chunks of recent edits, open documents, related workspace files
    candidates: int = 1  # suggestions wanted: the greedy one plus branches
    others_typing: bool = False  # another session typed just now: its next keystroke waits behind this read


@dataclass
class Completion(GenerationResult):
    """What decoding produced, with what the server adds to it. `stop_reason` may be the
    server's own "word": cut at a doubted token inside a word the file's words completed."""

    short: bool = False  # answered from the short prompt (the full one was not read yet)
    by_draft: bool = False  # the draft model answered while the heavier target read
    cpu_ms: float = 0.0  # CPU time of the model thread on this request
    alternatives: list[str] = field(default_factory=list)  # other candidates, when asked for

    @classmethod
    def of(cls, result: GenerationResult, **server_fields) -> Completion:
        return cls(**vars(result), **server_fields)


class Backend(Protocol):
    """A backend the worker completes with; every method runs on the model thread."""

    family: str  # the prompt family, or the remote kind, for the stats and the log
    describe: str  # what serves: a model file, or a remote engine and its address
    reads_ahead: bool  # reads prompts while idle (didFocus) and continues after a shown suggestion

    def complete(self, req: Request) -> Completion | None:
        """Answer `req`; None when there is nothing to answer from (cancelled, no prompt)."""
        ...

    def cancel_background(self) -> None:
        """Whatever runs in the background stops now (from any thread)."""
        ...

    def stats(self) -> dict:
        """This backend's figures for `specfill/stats`."""
        ...

    def close(self) -> None: ...
