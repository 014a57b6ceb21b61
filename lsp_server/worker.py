"""Model work on the server's own single thread, never on pygls's pool."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from lsp_server.postprocess import wants_single_line
from lsp_server.remote import RemoteEngine, RemoteError
from lsp_server.settings import Settings
from prompts import FAMILIES, ContextFile, PromptError, build_prompt, family_for, prompt_tokens
from prompts.window import prefix_window, suffix_window
from speculative import Engine, GenerationResult, ModelError, resolve_model_path
from speculative.build_info import build_info
from speculative.candidates import branch
from speculative.cost_model import CostModel, load_cost_model
from speculative.drafters import Auto, DraftModel, PromptLookup

CONTEXT_FILES = 2  # context files (the most useful first: see SpecfillServer.other_documents) in the prompt
LOOKUP_FILES = 4  # context files prompt lookup may copy from
CONTEXT_CHARS = 1000  # of each, in the prompt
LOOKUP_CHARS = 8000  # of each, for prompt lookup


@dataclass(frozen=True)
class Request:
    prefix: str
    suffix: str
    path: str
    settings: Settings
    cancel: threading.Event
    on_text: Callable[[str], None] | None = None
    others: tuple[ContextFile, ...] = ()  # chunks of recent edits, open documents, related workspace files
    candidates: int = 1  # suggestions wanted: the greedy one plus branches


class ModelWorker:
    """Owns the engines; a newer request cancels the one in flight at its next step."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specfill-model")
        self._cancel = threading.Event()
        self._stop = threading.Event()  # shutting down: a cost profile in progress ends early
        self.engine: Engine | None = None
        self.draft: DraftModel | None = None
        self.remote: RemoteEngine | None = None  # a serving engine instead of the local model
        self.costs: CostModel | None = None
        self.lookup = PromptLookup()
        self.family = "prefix-only"
        self.error: str | None = None
        self.warning: str | None = None  # a problem that still lets the target serve
        self._loads = 0  # submitted and not finished; requests get nothing while > 0
        self._loads_lock = threading.Lock()
        self._wanted_key: tuple | None = None  # of the latest load asked for

    @property
    def loading(self) -> bool:
        return self._loads > 0

    @property
    def ready(self) -> bool:
        return not self.loading and (self.engine is not None or self.remote is not None)

    @property
    def state(self) -> str:
        if self.error:
            return "error"
        return "ready" if self.ready else "loading"

    @staticmethod
    def _key(settings: Settings) -> tuple:
        m = settings.model
        return (m.path, m.draft_path, m.n_ctx, m.threads, tuple(vars(m.remote).values()))

    def needs_reload(self, settings: Settings) -> bool:
        """Settings that ask for other models than the last load did (done or queued)."""
        return self._key(settings) != self._wanted_key

    def load(self, settings: Settings) -> Future[str]:
        """Load (or reload) the models; the future's result is the path loaded."""
        with self._loads_lock:
            self._loads += 1
        self._wanted_key = self._key(settings)
        self._cancel.set()
        future = self._pool.submit(self._load, settings)
        future.add_done_callback(self._loaded)
        return future

    def _loaded(self, _: Future) -> None:
        with self._loads_lock:
            self._loads -= 1

    def _close(self) -> None:
        for eng in (self.engine, self.draft.engine if self.draft else None):
            if eng is not None:
                eng.close()
        self.engine, self.draft, self.remote = None, None, None

    def _load(self, settings: Settings) -> str:
        self.error = self.warning = None
        self._close()
        m = settings.model
        if m.remote.url:
            return self._load_remote(settings)
        try:
            path = resolve_model_path(m.path or None)
            engine = Engine(path, n_ctx=m.n_ctx, n_threads=m.threads or None)
            self.costs = load_cost_model(engine, engine.n_threads, build_info()["build"], stop=self._stop)
        except Exception as exc:
            self.error = str(exc)
            raise
        self.family = family_for(engine)
        self.engine = engine
        warnings = [self.costs.not_saved]
        self.lookup = PromptLookup()
        if m.draft_path:
            draft_engine = None
            try:
                draft_engine = Engine(resolve_model_path(m.draft_path), n_ctx=m.n_ctx, n_threads=m.threads or None)
                dcosts = load_cost_model(draft_engine, draft_engine.n_threads, build_info()["build"],
                                         stop=self._stop)
                self.draft = DraftModel(draft_engine, engine, dcosts)
            except (ModelError, OSError) as exc:
                if draft_engine is not None:
                    draft_engine.close()
                warnings.append(f"draft model not used: {exc}")
        self.warning = "; ".join(w for w in warnings if w) or None
        return str(path)

    def _load_remote(self, settings: Settings) -> str:
        """No local model: check the engine answers. One that does not yet still gets the
        requests (it may be starting); the editor is told."""
        try:
            remote = RemoteEngine(settings.model.remote)
        except RemoteError as exc:
            self.error = str(exc)
            raise
        try:
            remote.probe()
        except RemoteError as exc:
            self.warning = f"remote engine not answering yet: {exc}"
        self.family = f"remote {settings.model.remote.kind}"
        self.remote = remote
        return remote.describe()

    def drafter(self, method: str):
        if method == "off":
            return None
        if method == "lookup":
            return self.lookup
        if method == "draft":
            return self.draft
        return Auto(self.lookup, self.draft)

    def complete(self, prefix: str, suffix: str, path: str, settings: Settings,
                 cancel: threading.Event | None = None,
                 on_text: Callable[[str], None] | None = None,
                 others: tuple[ContextFile, ...] = (), candidates: int = 1) -> Future[GenerationResult | None]:
        self._cancel.set()  # supersede whatever runs now
        cancel = cancel or threading.Event()
        self._cancel = cancel
        return self._pool.submit(self._complete, Request(prefix, suffix, path, settings, cancel, on_text, others,
                                                         candidates))

    def _complete(self, req: Request) -> GenerationResult | None:
        if req.cancel.is_set():
            return None
        if self.remote is not None:
            return self._complete_remote(self.remote, req)
        if self.engine is None:
            return None
        engine, s = self.engine, req.settings
        max_tokens = max(1, min(s.completion.max_tokens, engine.n_ctx // 2))
        context, prefix, suffix, line_stop = self._shape(req)
        parts = build_prompt(self.family, prefix, suffix, req.path, context=context)
        try:
            tokens = prompt_tokens(engine, parts, engine.n_ctx - max_tokens - 1)
        except PromptError:
            return None
        stop = parts.stop + line_stop
        sources = [engine.tokenize(suffix, parse_special=False)]  # text worth copying from
        sources += [engine.tokenize(o.text[-LOOKUP_CHARS:], parse_special=False) for o in req.others[:LOOKUP_FILES]]
        cpu0 = time.thread_time()
        result = engine.generate(tokens, max_tokens=max_tokens, stop=stop, budget_s=s.completion.budget_ms / 1000,
                                 cancel=req.cancel, on_text=req.on_text, drafter=self.drafter(s.speculation.method),
                                 costs=self.costs, extra_sources=sources, max_draft=s.speculation.max_draft)
        if req.candidates > 1 and result.tokens and not req.cancel.is_set():
            # Alternatives about as long as the greedy one, all advancing in one batch a token.
            alts = branch(engine, tokens, req.candidates - 1, min(max_tokens, len(result.tokens) + 4), stop,
                          exclude=[result.tokens[0]], cancel=req.cancel)
            result.alternatives = [text for _, text in alts]
            if req.cancel.is_set():
                result.stop_reason = "cancelled"  # stopped while branching: counts as superseded
        result.cpu_ms = (time.thread_time() - cpu0) * 1000
        return result

    @staticmethod
    def _shape(req: Request) -> tuple[list[ContextFile], str, str, tuple[str, ...]]:
        """What any engine is asked with: context files, the windowed prefix and suffix, and
        the stop that keeps a suggestion to one line where one line is wanted."""
        # Other open documents: a short chunk each in the prompt (the fit drops them first when
        # space is short); prompt lookup gets more of their text (LOOKUP_CHARS).
        context = [ContextFile(o.path, o.text[-CONTEXT_CHARS:]) for o in req.others[:CONTEXT_FILES]]
        prefix, suffix = prefix_window(req.prefix), suffix_window(req.suffix)
        single = wants_single_line(suffix.split("\n", 1)[0], req.settings.completion.multiline)
        return context, prefix, suffix, ("\n",) if single else ()

    def _complete_remote(self, remote: RemoteEngine, req: Request) -> GenerationResult:
        s = req.settings
        context, prefix, suffix, line_stop = self._shape(req)
        stop = FAMILIES[s.model.remote.template].stop + line_stop
        return remote.generate(prefix, suffix, req.path, context, max_tokens=s.completion.max_tokens, stop=stop,
                               budget_s=s.completion.budget_ms / 1000, cancel=req.cancel, on_text=req.on_text)

    def stop(self) -> None:
        """Ask the running work to end at its next step; does not wait."""
        self._stop.set()
        self._cancel.set()

    def shutdown(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._close()
