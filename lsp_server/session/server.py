"""LSP handlers: a few lines each; the work lives in the pipeline, the context, the backends,
prompts and postprocess."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from lsp_server import __version__
from lsp_server.backends.worker import ModelWorker
from lsp_server.backends.worker_pool import WorkerPool
from lsp_server.postprocess import Suggestion
from lsp_server.session.context import EditorContext
from lsp_server.session.controls import suggestions_allowed
from lsp_server.session.logs import EditorHandler, set_level
from lsp_server.session.pipeline import RELATED_BY_CHARS, Pipeline, Place
from lsp_server.session.protocol import SpecfillProtocol
from lsp_server.settings import Settings, parse_settings, to_wire
from speculative.build_info import build_info
from speculative.errors import Cancelled

log = logging.getLogger("specfill")
ACCEPT_COMMAND = "specfill.didAccept"
REFRESH = "specfill/inlineCompletion/refresh"  # to the editor: ask again here (as workspace/inlayHint/refresh)


class SpecfillServer(LanguageServer):
    """One editor's session: its documents, settings, context and statistics. The model worker
    comes from `pool`, which the shared server's sessions have in common."""

    def __init__(self, pool: WorkerPool | None = None) -> None:
        super().__init__("specfill", __version__, protocol_cls=SpecfillProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.log_handler = EditorHandler(self.window_log_message, self)
        log.addHandler(self.log_handler)
        self.pool = pool or WorkerPool()
        self.pool.sessions.add(self)
        self.client_name = ""  # from initialize, for `specfill status`
        self.started = time.time()
        self.settings = Settings()
        self.worker = ModelWorker()  # unloaded until initialized: requests meanwhile get nothing
        self.context = EditorContext(lambda: self.workspace.text_documents)
        self.pipeline = Pipeline(self.worker, self.context.other_documents, self.suggestion_grew)
        self.reported: set[str] = set()  # setting errors the editor was told of
        self.focused: tuple[str, int, int] | None = None  # the last place didFocus named

    def workspace_roots(self) -> list[str]:
        folders = [f.uri for f in self.workspace.folders.values()] if self.workspace.folders else []
        if not folders and self.workspace.root_uri:
            folders = [self.workspace.root_uri]
        return [p for u in folders if u and u.startswith("file:") and (p := uris.to_fs_path(u))]

    def update_index(self) -> None:
        """Start, restart or stop the workspace indexer to match settings and folders."""
        self.context.update_index(self.workspace_roots() if self.settings.context.workspace else [])

    def focus(self, uri: str, line: int, character: int) -> None:
        """The cursor landed or rests here: read its prompt while idle. Said while the model
        loads (an editor opened with a file), it is done once the model is ready."""
        self.focused = (uri, line, character)
        if not self.worker.ready:
            return
        at = _place(self, uri, types.Position(line=line, character=character)) \
            if line >= 0 and character >= 0 else None
        backend = self.worker.backend
        if at is None or not (backend and backend.reads_ahead) \
                or not suggestions_allowed(self.settings, at.path, at.language, invoked=True):
            return
        log.debug("didFocus at %s:%d:%d", at.path, line, character)
        others = self.context.other_documents(uri, at.prefix[-RELATED_BY_CHARS:], self.settings)
        self.worker.read_ahead(at.prefix, at.suffix, at.path, self.settings, others)

    def suggestion_grew(self, uri: str) -> None:
        """Ask the editor to ask again at `uri`: the suggestion it was given in part is whole."""
        self.protocol.notify(REFRESH, {"uri": uri})

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"specfill: {message}"))

    def report_server_error(self, error: Exception, source) -> None:
        """pygls's out-of-band errors (a message it could not read): into the log, not a pop-up."""
        log.warning("%s: %s", getattr(source, "__name__", source), error)

    def apply_settings(self, data, source: str) -> None:
        """Take new settings; name each invalid field; reload the model when it changed."""
        settings, errors = parse_settings(data)
        set_level(settings.log_level, self.log_handler)
        for err in errors:
            if err not in self.reported:  # every configuration change resends the same mistakes
                self.reported.add(err)
                self.tell(f"invalid setting {err} ({source})", types.MessageType.Warning)
                log.warning("invalid setting %s (%s)", err, source)
        changed = _changed(to_wire(Settings()), to_wire(settings))
        log.info("settings from %s: %s", source, ", ".join(f"{k}={v!r}" for k, v in changed.items()) or "defaults")
        self.settings = settings
        self.pipeline.reset()
        if self.worker.needs_reload(settings) and source != "initialize":
            asyncio.ensure_future(self.reload())
        if source != "initialize":
            self.update_index()

    def end(self) -> None:
        """The session ends (shutdown, or its connection closed): its model is let go."""
        self.context.update_index([])
        self.pool.sessions.discard(self)
        self.pool.release(self)
        log.removeHandler(self.log_handler)

    async def reload(self) -> None:
        """Load the model in the background (or take the one another session loaded), with
        work-done progress when the client has it; requests meanwhile get an empty answer."""
        self.worker, load = self.pool.take(self, self.settings)  # says "loading" from now on
        self.pipeline.worker = self.worker
        loading = asyncio.wrap_future(load)
        token = None
        caps = self.client_capabilities.window
        if caps is not None and caps.work_done_progress:
            token = f"specfill-load-{uuid.uuid4().hex[:8]}"
            try:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title="specfill", message=f"loading {self.settings.model.path or 'the default model'}"))
            except Exception:  # a client that refuses progress still gets the model
                token = None
        try:
            message = f"ready: {await loading}"
            if self.worker.warning:
                self.tell(self.worker.warning, types.MessageType.Warning)
            if self.focused is not None:
                self.focus(*self.focused)  # where the cursor was while the model loaded
        except Cancelled:
            message = "given up for newer settings"  # the next load says how that one went
        except Exception as exc:
            message = f"failed: {exc}"
            self.tell(str(exc))
        if token is not None:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))


def _changed(default: dict, current: dict, prefix: str = "") -> dict:
    """Settings that differ from their defaults, by dotted name (for the log; keys not shown)."""
    out = {}
    for key, value in current.items():
        name = prefix + key
        if isinstance(value, dict):
            out.update(_changed(default.get(key, {}), value, name + "."))
        elif value != default.get(key):
            out[name] = "***" if key == "apiKey" and value else value
    return out


_FEATURES: list[tuple[str, object, Callable]] = []


def _feature(method: str, options: object = None) -> Callable[[Callable], Callable]:
    """A handler every session registers (create_server)."""
    def register(fn: Callable) -> Callable:
        _FEATURES.append((method, options, fn))
        return fn
    return register


@_feature(types.INITIALIZE)
def on_initialize(ls: SpecfillServer, params: types.InitializeParams) -> None:
    """Read settings from initializationOptions."""
    ls.log_handler.attach(asyncio.get_running_loop())
    ls.client_name = params.client_info.name if params.client_info else "an editor"
    ls.apply_settings(params.initialization_options, "initialize")


@_feature(types.INITIALIZED)
async def on_initialized(ls: SpecfillServer, params: types.InitializedParams) -> None:
    """Index the workspace and load the model, in the background."""
    ls.update_index()
    await ls.reload()


@_feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def on_configuration(ls: SpecfillServer, params: types.DidChangeConfigurationParams) -> None:
    """Settings pushed by the client, or pulled with workspace/configuration when it sends none."""
    data = params.settings
    if not (isinstance(data, dict) and "specfill" in data):
        caps = ls.client_capabilities.workspace
        if caps is None or not caps.configuration:
            return
        (data,) = await ls.workspace_configuration_async(types.ConfigurationParams(
            items=[types.ConfigurationItem(section="specfill")]))
        data = {"specfill": data or {}}
    ls.apply_settings(data, "didChangeConfiguration")


@_feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def on_folders(ls: SpecfillServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    """New workspace folders: index them instead."""
    ls.update_index()


@_feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: SpecfillServer, params: types.DidOpenTextDocumentParams) -> None:
    """Remember when a document was last touched (context from other open files)."""
    ls.context.touched(params.text_document.uri, 0)


@_feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: SpecfillServer, params: types.DidChangeTextDocumentParams) -> None:
    """Remember when and where a document was last edited (context for other documents)."""
    first = params.content_changes[0] if params.content_changes else None
    line = first.range.start.line if isinstance(first, types.TextDocumentContentChangePartial) else 0
    ls.context.touched(params.text_document.uri, line)


@_feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: SpecfillServer, params: types.DidCloseTextDocumentParams) -> None:
    """Forget a closed document and its cached suggestion."""
    ls.context.forget(params.text_document.uri)
    ls.pipeline.cache.drop(params.text_document.uri)


def _place(ls: SpecfillServer, uri: str, pos: types.Position) -> Place | None:
    doc = ls.workspace.text_documents.get(uri)
    if doc is None:
        return None
    lines = doc.lines
    if pos.line < 0 or pos.character < 0 or pos.line > len(lines):
        return None
    if pos.line == len(lines):
        if pos.character:
            return None
        offset = len(doc.source)
    else:
        line = lines[pos.line].rstrip("\r\n")
        if doc.position_codec.client_num_units(line) < pos.character:
            return None
        offset = doc.offset_at_position(pos)
    source = doc.source
    return Place(uri, doc.path or uri, source[:offset], source[offset:], doc.language_id or "")


def _replaced(pos: types.Position, suggestion: Suggestion) -> types.Range:
    """The cursor, widened over the closing brackets that the suggestion retypes."""
    return types.Range(start=pos, end=types.Position(line=pos.line, character=pos.character + suggestion.replace_chars))


def _accept_command(at: Place, suggestion: Suggestion) -> types.Command:
    return types.Command(title="specfill: accepted", command=ACCEPT_COMMAND,
                         arguments=[{"uri": at.uri, "length": len(suggestion.text)}])


@_feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: SpecfillServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    """Complete at the cursor; unknown documents and bad positions get an empty list."""
    at = _place(ls, params.text_document.uri, params.position)
    if at is None:
        return types.InlineCompletionList(items=[])
    invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    if invoked and ls.settings.completion.candidates > 1:
        suggestions = await ls.pipeline.suggest_candidates(at, ls.settings, ls.tell)
    else:
        one = await ls.pipeline.suggest(at, ls.settings, invoked, ls.tell)
        suggestions = [one] if one is not None else []
    return types.InlineCompletionList(items=[types.InlineCompletionItem(
        insert_text=s.text, range=_replaced(params.position, s), command=_accept_command(at, s))
        for s in suggestions])


@_feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
async def completion(ls: SpecfillServer, params: types.CompletionParams) -> types.CompletionList:
    """For clients without inline completion: the suggestion as one item with a textEdit.
    Clients with inline completion get nothing here, or they would show it twice."""
    caps = ls.client_capabilities.text_document
    if caps is not None and caps.inline_completion is not None:
        return types.CompletionList(is_incomplete=False, items=[])
    at = _place(ls, params.text_document.uri, params.position)
    suggestion = await ls.pipeline.suggest(at, ls.settings, True, ls.tell) if at else None
    if at is None or suggestion is None:
        return types.CompletionList(is_incomplete=True, items=[])
    label = suggestion.text.split("\n", 1)[0].strip()[:60] or suggestion.text.strip()[:60]
    return types.CompletionList(is_incomplete=True, items=[types.CompletionItem(
        label=label, kind=types.CompletionItemKind.Text, detail="specfill", sort_text="0",
        filter_text=at.prefix.rsplit("\n", 1)[-1].lstrip() + suggestion.text,
        text_edit=types.TextEdit(range=_replaced(params.position, suggestion), new_text=suggestion.text),
        command=_accept_command(at, suggestion))])


def accept_command(ls: SpecfillServer, *args) -> None:
    """The command an accepted item runs: counts the acceptance."""
    info = args[0] if args and isinstance(args[0], dict) else {}
    ls.pipeline.accepted(int(info.get("length", 0)))


@_feature("specfill/didFocus")
def did_focus(ls: SpecfillServer, params) -> None:
    """The cursor landed or rests here ({textDocument: {uri}, position}): read its prompt while idle."""
    doc, pos = _get(params, "textDocument"), _get(params, "position")
    uri = _get(doc, "uri") if doc is not None else None
    line, character = (_get(pos, "line"), _get(pos, "character")) if pos is not None else (None, None)
    if not (isinstance(uri, str) and isinstance(line, int) and isinstance(character, int)):
        log.warning("specfill/didFocus needs {textDocument: {uri}, position: {line, character}}: %.200r", params)
        return
    ls.focus(uri, line, character)


def _get(obj, name: str):
    """A field of params pygls left untyped (a dict, or a namedtuple for custom methods)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


@_feature("specfill/didShow")
def did_show(ls: SpecfillServer, params) -> None:
    """The editor showed a suggestion."""
    ls.pipeline.stats.shown += 1


@_feature("specfill/didAccept")
def did_accept(ls: SpecfillServer, params) -> None:
    """The editor accepted a suggestion, maybe partly (acceptedLength)."""
    length = getattr(params, "acceptedLength", None)
    if length is None and isinstance(params, dict):
        length = params.get("acceptedLength")
    ls.pipeline.accepted(int(length or 0))


@_feature("specfill/stats")
def stats(ls: SpecfillServer, params) -> dict:
    """Counts, latency percentiles, speculation figures and the loaded build."""
    return ls.pipeline.stats.report({
        **ls.worker.stats(), "build": build_info(), "speculation": ls.settings.speculation.method,
        "shared": ls.pool.shared, "sessions": sum(1 for s in ls.pool.sessions if s.client_name),
        "time": time.time(), "threads": threading.active_count(), "context_chunks": len(ls.context.chunks),
        "workspace": {"roots": [str(r) for r in index.roots], "files": len(index.files),
                      "scanned": index.ready.is_set()} if (index := ls.context.index) else None,
    })


@_feature("specfill/sharedStatus")
def shared_status(ls: SpecfillServer, params) -> dict:
    """The server's pid, build, sessions and models (`specfill status`)."""
    return ls.pool.status(__version__, build_info()["build"])


@_feature("specfill/document")
def document(ls: SpecfillServer, params) -> dict | None:
    """The server's copy of a document ({"uri"}), for checking synchronisation (specfill stress)."""
    uri = getattr(params, "uri", None) or (params.get("uri") if isinstance(params, dict) else None)
    doc = ls.workspace.text_documents.get(uri) if uri else None
    return None if doc is None else {"uri": uri, "version": doc.version, "text": doc.source}


@_feature(types.SHUTDOWN)
def on_shutdown(ls: SpecfillServer, params: None) -> None:
    ls.end()


def create_server(pool: WorkerPool | None = None) -> SpecfillServer:
    """A session with every handler; the shared server makes one per connection."""
    ls = SpecfillServer(pool)
    for method, options, fn in _FEATURES:
        ls.feature(method, options)(fn)
    ls.command(ACCEPT_COMMAND)(accept_command)
    return ls
