"""The server's log: the `specfill` logger, forwarded to the editor as window/logMessage.

Records come from any thread (the model worker logs each generation); they are sent from the
event loop's thread, as pygls writes to one stream. Only the `specfill` logger is forwarded:
pygls logs every message it sends, and forwarding that would send a message per message.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable

from lsprotocol import types

log = logging.getLogger("specfill")

LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
_TYPES = ((logging.ERROR, types.MessageType.Error), (logging.WARNING, types.MessageType.Warning),
          (logging.INFO, types.MessageType.Info), (logging.NOTSET, types.MessageType.Log))
FORMAT = "%(asctime)s %(levelname)s %(message)s"
# The shared server's session whose handler logs now (set per connection, inherited by its
# tasks); records logged outside any session (the model thread) go to every editor.
SESSION: contextvars.ContextVar[object | None] = contextvars.ContextVar("specfill_session", default=None)


class EditorHandler(logging.Handler):
    """Sends each record to the editor with `send(params)` on the loop's thread: the records of
    its own session (`owner`) and those of no session."""

    def __init__(self, send: Callable[[types.LogMessageParams], None], owner: object = None) -> None:
        super().__init__()
        self.send = send
        self.owner = owner
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: int | None = None
        self.setFormatter(logging.Formatter("%(message)s"))

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.loop_thread = loop, threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if self.loop is None or self.loop.is_closed():
            return  # before initialize (no editor to tell yet) or after the loop ended
        if SESSION.get() not in (None, self.owner):
            return  # another editor's
        kind = next(t for level, t in _TYPES if record.levelno >= level)
        params = types.LogMessageParams(type=kind, message=self.format(record))
        try:
            if threading.get_ident() == self.loop_thread:
                self.send(params)
            else:
                self.loop.call_soon_threadsafe(self.send, params)
        except Exception:  # a closing stream must not take the caller down with it
            self.handleError(record)


def set_level(name: str, editor: EditorHandler | None = None) -> None:
    """A session's logLevel: what its editor is sent; the logger (and the log file) records the
    most detailed level any session asked for."""
    level = LEVELS.get(name, logging.INFO)
    if editor is not None:
        editor.setLevel(level)
    levels = [h.level for h in log.handlers if isinstance(h, EditorHandler) and h.level]
    log.setLevel(min(levels, default=level))


def add_file(path: str) -> None:
    """`specfill serve --log-file`: the same records, with times, appended to a file."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    log.addHandler(handler)
