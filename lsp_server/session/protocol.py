"""JSON-RPC that answers every request, also those whose params cannot be read.

pygls turns a message into typed params while parsing it; when that fails (a negative
position, a missing field, params that are a list) it logs and drops the message, so the
client waits for an answer forever. Here such a request gets InvalidParams at once, a bad
notification is logged and skipped, and the stream goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger("specfill")


class _Answered:
    """A message already answered with an error while it was parsed: nothing more to do."""

    jsonrpc = None


ANSWERED = _Answered()


def _params_error(data: dict[str, Any], exc: Exception) -> str:
    cause = exc.__cause__ or exc
    why = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    return f"invalid params for {data.get('method')!r}: {why}"


class SpecfillProtocol(LanguageServerProtocol):
    on_exit: Callable[[], None] | None = None  # the shared server's session: exit ends only it

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args) -> Generator[Any, Any, None]:
        """`exit` ends the process, or in the shared server the session alone."""
        if self.on_exit is None:
            yield from super().lsp_exit(*args)
            return
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        if self.writer is not None:
            self.writer.close()
        self.on_exit()

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not (isinstance(data, dict) and "jsonrpc" in data and "method" in data):
                raise
            message = _params_error(data, exc)
            if "id" in data:  # a request: its sender waits for this answer
                log.warning("request %s: %s", data["id"], message)
                error = JsonRpcInvalidParams(message).to_response_error()
                self._send_response(data["id"], None, error)
            else:
                log.warning("notification skipped: %s", message)
            return ANSWERED

    def handle_message(self, message) -> None:
        if message is ANSWERED:
            return
        if not hasattr(message, "jsonrpc"):  # valid JSON that is no JSON-RPC message (a bare list, a number)
            log.warning("not a JSON-RPC message, skipped: %.200r", message)
            return
        super().handle_message(message)
