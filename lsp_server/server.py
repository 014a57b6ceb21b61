"""LSP handlers: a few lines each; the work lives in worker, prompts and postprocess."""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp_server.postprocess import postprocess
from lsp_server.settings import Settings, parse_settings
from lsp_server.worker import ModelWorker

log = logging.getLogger("specfill")


class SpecfillServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("specfill", "0.1.0", text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.worker = ModelWorker()

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"specfill: {message}"))


server = SpecfillServer()


@server.feature(types.INITIALIZE)
def on_initialize(ls: SpecfillServer, params: types.InitializeParams) -> None:
    """Read settings from initializationOptions."""
    ls.settings, errors = parse_settings(params.initialization_options)
    ls.init_errors = errors


@server.feature(types.INITIALIZED)
def on_initialized(ls: SpecfillServer, params: types.InitializedParams) -> None:
    """Report bad settings, then load the model in the background."""
    for err in getattr(ls, "init_errors", []):
        ls.tell(f"invalid setting {err}", types.MessageType.Warning)
    future = ls.worker.load(ls.settings)

    def done(f) -> None:
        if f.exception() is not None:
            ls.tell(str(f.exception()))
        else:
            log.info("model loaded: %s", f.result())

    future.add_done_callback(done)


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: SpecfillServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    """Complete at the cursor; unknown documents and bad positions get an empty list."""
    empty = types.InlineCompletionList(items=[])
    doc = ls.workspace.text_documents.get(params.text_document.uri)
    if doc is None or ls.worker.error is not None:
        return empty
    lines = doc.lines
    pos = params.position
    if pos.line > len(lines) or pos.line < 0 or pos.character < 0:
        return empty
    offset = doc.offset_at_position(pos) if pos.line < len(lines) else len(doc.source)
    source = doc.source
    prefix, suffix = source[:offset], source[offset:]
    path = doc.path if doc.path else doc.uri
    try:
        result = await asyncio.wrap_future(ls.worker.complete(prefix, suffix, path, ls.settings))
    except Exception as exc:  # a request never kills the server
        log.exception("completion failed")
        ls.tell(f"completion failed: {exc}")
        return empty
    if result is None:
        return empty
    line_suffix, _, below = suffix.partition("\n")
    text = postprocess(result.text, line_suffix, below.split("\n"), prefix.rsplit("\n", 1)[-1])
    if not text:
        return empty
    return types.InlineCompletionList(items=[
        types.InlineCompletionItem(insert_text=text, range=types.Range(start=pos, end=pos))
    ])


@server.feature(types.SHUTDOWN)
def on_shutdown(ls: SpecfillServer, params: None) -> None:
    ls.worker.shutdown()
