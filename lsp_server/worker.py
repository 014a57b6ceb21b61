"""Model work on the server's own single thread, never on pygls's pool.

A request is served from the full prompt when its uncached part can be read within
`completion.promptBudgetMs` (from the measured prompt rate); otherwise from a short prompt of
the lines nearest the cursor, on a sequence of its own, while the full prompt is read in the
background between requests (any request stops that at once, inside its decode). Typing on
where the short prompt answers, it keeps answering until at most a chunk of the full one is
unread.
Places the user left stay warm (speculative/windows.py), and their context stays pinned, so
coming back reads nothing again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsp_server.postprocess import wants_single_line
from lsp_server.settings import Settings
from lsp_server.words import complete_word
from prompts import FAMILIES, ContextFile, PromptError, build_prompt, family_for, prompt_tokens
from prompts.heal import heal_split
from prompts.window import prefix_window, short_window, suffix_window
from speculative import Engine, GenerationResult, ModelError, resolve_model_path
from speculative.build_info import build_info
from speculative.candidates import branch
from speculative.convert import weights_path
from speculative.cost_model import CostModel, load_cost_model
from speculative.decode import clamp_max_tokens
from speculative.drafters import Auto, DraftModel, PromptLookup
from speculative.engine import SHORT, WINDOW
from speculative.errors import Cancelled
from speculative.heal import Heal, PieceIndex
from speculative.windows import WarmWindows

if TYPE_CHECKING:
    from lsp_server.remote import RemoteEngine

log = logging.getLogger("specfill")

CONTEXT_FILES = 2  # context files (the most useful first: see SpecfillServer.other_documents) in the prompt
LOOKUP_FILES = 4  # context files prompt lookup may copy from
CONTEXT_CHARS = 1000  # of each, in the prompt
LOOKUP_CHARS = 8000  # of each, for prompt lookup
READ_CHUNK = 32  # tokens a background read evaluates between looks at waiting requests (one ubatch)
MIN_SHORT_TOKENS = 48  # the least a short prompt holds: fewer say too little
CHARS_PER_TOKEN = 2.5  # of code, on the low side: a short window of N tokens' chars stays under N
PINNED = 16  # places whose context stays pinned


class _Yield:
    """The stop condition of a background read (an engine StopFlag)."""

    def __init__(self, stop: Callable[[], bool]) -> None:
        self.is_set = stop


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


@dataclass
class Prompt:
    """What one request asks the local model, full or short."""

    tokens: list[int]
    stop: tuple[str, ...]
    heal: bytes
    seq: int


def open_engine(source, weights: str, n_ctx: int, threads: int | None, warnings: list) -> tuple[Engine, object]:
    """The engine on the weights the setting asks for; a converted file that llama.cpp cannot
    load is converted again (once), and `warnings` says so (for the editor)."""
    path = weights_path(source, weights)
    try:
        return Engine(path, n_ctx=n_ctx, n_threads=threads), path
    except ModelError as exc:
        if path == source:
            raise
        warnings.append(f"converted model {path} was unreadable ({exc}); converted it again")
        path = weights_path(source, weights, rebuild=True)
        return Engine(path, n_ctx=n_ctx, n_threads=threads), path


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
        self.windows = WarmWindows()
        self.family = "prefix-only"
        self.loaded = ""  # the model asked for (a path, or the remote engine), once it serves
        self.model_file = ""  # what was loaded (the converted weights, when converted)
        self.error: str | None = None
        self.warning: str | None = None  # a problem that still lets the target serve
        self._loads = 0  # submitted and not finished; requests get nothing while > 0
        self._loads_lock = threading.Lock()
        self._wanted_key: tuple | None = None  # of the latest load asked for
        self._pieces: PieceIndex | None = None
        self._pins: OrderedDict[tuple[str, int], tuple[ContextFile, ...]] = OrderedDict()
        self._short: OrderedDict[str, tuple[int, int]] = OrderedDict()  # path -> short window (start, tokens)
        self._ahead: list[int] | None = None  # a full prompt to read while idle
        self._ahead_queued = False
        # A background read yields to any request submitted and not yet started, and stops when
        # the cursor moves elsewhere. Counters, each written by one thread only, not events
        # swapped between threads: a swapped event let a read outlive the request that should
        # have stopped it.
        self._submitted = 0  # requests and loads submitted (by callers, under the lock)
        self._submitted_lock = threading.Lock()
        self._started = 0  # of those, started (by the worker thread)
        self._focus = 0  # didFocus notifications seen
        self.read_ahead_tokens = 0  # prompt tokens read in the background, ever

    @property
    def reading(self) -> bool:
        """A full prompt is waiting to be read in the background."""
        return self._ahead is not None

    def _yield(self, focus: int) -> _Yield:
        return _Yield(lambda: self._submitted != self._started or self._focus != focus or self._stop.is_set())

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
        return (m.path, m.draft_path, m.n_ctx, m.threads, m.weights, tuple(vars(m.remote).values()))

    def needs_reload(self, settings: Settings) -> bool:
        """Settings that ask for other models than the last load did (done or queued)."""
        return self._key(settings) != self._wanted_key

    def load(self, settings: Settings) -> Future[str]:
        """Load (or reload) the models; the future's result is the path loaded."""
        with self._loads_lock:
            self._loads += 1
        self._wanted_key = self._key(settings)
        self._interrupt()
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
        if self.remote is not None:
            self.remote.close()
        self.engine, self.draft, self.remote, self._pieces, self._ahead = None, None, None, None, None
        self.loaded = self.model_file = ""
        self.windows.clear()
        self._pins.clear()

    def _load(self, settings: Settings) -> str:
        self._started += 1
        self.error = self.warning = None
        self._close()
        m = settings.model
        if m.remote.url:
            return self._load_remote(settings)
        t0 = time.perf_counter()
        warnings: list[str | None] = []
        try:
            source = resolve_model_path(m.path or None)
            engine, path = open_engine(source, m.weights, m.n_ctx, m.threads or None, warnings)
            self.costs = load_cost_model(engine, engine.n_threads, build_info()["build"], stop=self._stop)
        except Exception as exc:
            self.error = str(exc)
            log.error("model not loaded: %s", exc)
            log.debug("model load failed", exc_info=exc)
            raise
        self.family = family_for(engine)
        self.engine, self.model_file = engine, str(path)
        engine.on_read = self._observe_read
        self._pieces = PieceIndex(engine.pieces())  # for token healing: built once, here, not mid-typing
        warnings.append(self.costs.not_saved)
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
        if self.warning:
            log.warning("%s", self.warning)
        log.info("model loaded in %.1f s: %s (%s family, %s, extra buffers %s, %d threads)",
                 time.perf_counter() - t0, path, self.family, build_info()["build"],
                 "+".join(engine.buffer_types) or "none", engine.n_threads)
        self.loaded = str(source)
        return self.loaded

    def _load_remote(self, settings: Settings) -> str:
        """No local model: check the engine answers. One that does not yet still gets the
        requests (it may be starting); the editor is told."""
        from lsp_server.remote import RemoteEngine, RemoteError  # httpx's memory only for a remote engine

        try:
            remote = RemoteEngine(settings.model.remote)
        except RemoteError as exc:
            self.error = str(exc)
            log.error("remote engine not usable: %s", exc)
            raise
        try:
            remote.probe()
        except RemoteError as exc:
            self.warning = f"remote engine not answering yet: {exc}"
            log.warning("%s", self.warning)
        self.family = f"remote {settings.model.remote.kind}"
        self.remote = remote
        log.info("completing with %s", remote.describe())
        self.loaded = remote.describe()
        return self.loaded

    def drafter(self, method: str):
        if method == "off":
            return None
        if method == "lookup":
            return self.lookup
        if method == "draft":
            return self.draft
        return Auto(self.lookup, self.draft)

    # -- requests ---------------------------------------------------------------------
    def _interrupt(self) -> None:
        """Whatever runs now ends at its next step: a request, or a background read (which
        yields to the work this is called for, counted in _submitted)."""
        with self._submitted_lock:
            self._submitted += 1
        self._cancel.set()
        self._stop_reading()

    def _stop_reading(self) -> None:
        """A background read stops inside its decode, not at the end of its chunk (30-60 ms)."""
        engine = self.engine
        if engine is not None:
            engine.stop_reading()

    def complete(self, prefix: str, suffix: str, path: str, settings: Settings,
                 cancel: threading.Event | None = None,
                 on_text: Callable[[str], None] | None = None,
                 others: tuple[ContextFile, ...] = (), candidates: int = 1) -> Future[GenerationResult | None]:
        self._interrupt()  # supersede whatever runs now
        cancel = cancel or threading.Event()
        self._cancel = cancel
        req = Request(prefix, suffix, path, settings, cancel, on_text, others, candidates)
        return self._pool.submit(self._serve, req)

    def read_ahead(self, prefix: str, suffix: str, path: str, settings: Settings,
                   others: tuple[ContextFile, ...] = ()) -> None:
        """The cursor rests here: read this place's full prompt while idle (specfill/didFocus)."""
        focus = self._focus = self._focus + 1  # a read of the place the cursor left ends now
        self._stop_reading()

        def plan() -> None:
            if self.engine is None or self._yield(focus).is_set():
                return
            log.debug("didFocus: reading ahead at %s (offset %d)", path, len(prefix))
            req = Request(prefix, suffix, path, settings, threading.Event(), None, others)
            full = self._full_prompt(req)
            if full is not None:
                self._ahead = full.tokens
            self._read_ahead(focus)

        self._pool.submit(plan)

    def _serve(self, req: Request) -> GenerationResult | None:
        self._started += 1
        try:
            return self._complete(req)
        finally:
            self._schedule_ahead()

    def _complete(self, req: Request) -> GenerationResult | None:
        if req.cancel.is_set():
            return None
        if self.remote is not None:
            return self._complete_remote(self.remote, req)
        if self.engine is None:
            return None
        engine, s = self.engine, req.settings
        max_tokens = clamp_max_tokens(s.completion.max_tokens, engine.n_ctx)
        full = self._full_prompt(req)
        if full is None:
            return None
        reusable = self.windows.prepare(engine, full.tokens)
        prompt, short = full, False
        budget = s.completion.prompt_budget_ms
        unread = len(full.tokens) - reusable
        quick = None
        if budget and self.read_ms(reusable, unread) > budget:
            quick = self._short_prompt(req, budget)
        elif budget and unread > READ_CHUNK:
            # Typing on where a short prompt already answers: it costs a token or two, so the
            # rest of the full prompt stays in the background. Read here, even within the
            # budget, it would make the keystroke that switched over miss.
            quick = self._warm_short_prompt(req, budget)
        if quick is not None and len(quick.tokens) < unread:
            # One line from the short prompt, then back to reading the full one.
            prompt, short = Prompt(quick.tokens, quick.stop + ("\n",), quick.heal, quick.seq), True
            self._ahead = full.tokens  # read in the background, so the next keystrokes use it
            # What the window holds beyond this prompt is another place's (saved by prepare if
            # worth it): attention spans every used cell, so it would slow the short read.
            engine.truncate(reusable, WINDOW)
        else:
            # The full prompt of where the cursor is gets read now: a read left pending for the
            # place before would evict it between keystrokes.
            self._ahead = None
        sources = [engine.tokenize(req.suffix[:4000], parse_special=False)]  # text worth copying from
        sources += [engine.tokenize(o.text[-LOOKUP_CHARS:], parse_special=False) for o in req.others[:LOOKUP_FILES]]
        cpu0 = time.thread_time()
        result = engine.generate(prompt.tokens, max_tokens=max_tokens, stop=prompt.stop,
                                 budget_s=s.completion.budget_ms / 1000, cancel=req.cancel, on_text=req.on_text,
                                 drafter=self.drafter(s.speculation.method), costs=self.costs,
                                 extra_sources=sources, max_draft=s.speculation.max_draft,
                                 heal=self._heal(prompt.heal), min_confidence=s.completion.min_confidence,
                                 index=self._pieces, seq=prompt.seq)
        result.short = short
        if result.stop_reason == "confidence" and (word := complete_word(result.text, req.prefix, req.suffix)):
            result.text, result.stop_reason = word, "word"  # the model doubted mid-word: the file's word decides
        if req.candidates > 1 and result.tokens and not req.cancel.is_set():
            # Alternatives about as long as the greedy one, all advancing in one batch a token.
            alts = branch(engine, prompt.tokens, req.candidates - 1, min(max_tokens, len(result.tokens) + 4),
                          prompt.stop, exclude=[result.tokens[0]], cancel=req.cancel, heal=self._heal(prompt.heal),
                          seq=prompt.seq)
            result.alternatives = [text for _, text in alts]
            if req.cancel.is_set():
                result.stop_reason = "cancelled"  # stopped while branching: counts as superseded
        result.cpu_ms = (time.thread_time() - cpu0) * 1000
        log.debug("generation: %s prompt %d tokens (%d reused)%s, %d tokens, drafted %d accepted %d, stop %s, "
                  "ttft %.0f ms, total %.0f ms", "short" if short else "full", result.n_prompt, result.n_reused,
                  f", healed {result.healed!r}" if result.healed else "", len(result.tokens), result.drafted,
                  result.accepted, result.stop_reason, result.ttft_ms, result.total_ms)
        return result

    def read_ms(self, start: int, n: int) -> float:
        """Expected ms to read n prompt tokens after `start`: profiled, kept current by real reads."""
        return self.costs.read.ms(start, n) if self.costs else 5.0 * n

    def _observe_read(self, n: int, depth: int, ms: float) -> None:
        if self.costs is not None:
            self.costs.read.observe(n, depth, ms)

    def prompt_tok_s(self) -> float:
        """Tokens a second a prompt is read at from its start, for the stats."""
        return 1000 * READ_CHUNK * 8 / max(self.read_ms(0, READ_CHUNK * 8), 1e-6)

    def _heal(self, text: bytes) -> Heal | None:
        if not text or self.engine is None or self._pieces is None:
            return None
        heal = Heal(self._pieces, self.engine.pieces(), text)
        return heal if heal.feasible() else None

    def _context(self, req: Request, prefix: str) -> list[ContextFile]:
        """Other files' text for the prompt, pinned per place: context changes with every edit
        elsewhere, and a prompt whose context changed must be read again from its start."""
        key = (req.path, len(req.prefix) - len(prefix))
        if key not in self._pins:
            self._pins[key] = tuple(ContextFile(o.path, o.text[-CONTEXT_CHARS:]) for o in req.others[:CONTEXT_FILES])
            while len(self._pins) > PINNED:
                self._pins.popitem(last=False)
        self._pins.move_to_end(key)
        return list(self._pins[key])

    def _tokens(self, req: Request, prefix: str, suffix: str, context: list[ContextFile], seq: int,
                budget: int | None = None) -> Prompt | None:
        """The prompt's tokens, healed when the cursor ends inside a token."""
        engine, s = self.engine, req.settings
        single = wants_single_line(suffix.split("\n", 1)[0], s.completion.multiline)
        budget = budget or engine.n_ctx - clamp_max_tokens(s.completion.max_tokens, engine.n_ctx) - 1
        for kept, healed in ([heal_split(prefix)] if s.completion.heal else []) + [(prefix, "")]:
            if healed and self._heal(healed.encode()) is None:
                continue
            parts = build_prompt(self.family, kept, suffix, req.path, context=context)
            try:
                tokens = prompt_tokens(engine, parts, budget)
            except PromptError:
                continue  # nothing left before a half-typed word at a file's start: no healing
            return Prompt(tokens, parts.stop + (("\n",) if single else ()), healed.encode(), seq)
        return None

    def _full_prompt(self, req: Request) -> Prompt | None:
        prefix, suffix = prefix_window(req.prefix), suffix_window(req.suffix)
        return self._tokens(req, prefix, suffix, self._context(req, prefix), WINDOW)

    def _warm_short_prompt(self, req: Request, budget_ms: int) -> Prompt | None:
        """The short prompt of this place if the short sequence holds all but its last
        tokens (the user types on where it answered), else None."""
        if not self._short_window_fits(req, *self._short.get(req.path, (-1, 0))):
            return None
        quick = self._short_prompt(req, budget_ms)
        if quick is None or len(quick.tokens) - self.engine.common_prefix(quick.tokens, SHORT) > READ_CHUNK // 4:
            return None
        return quick

    @staticmethod
    def _short_window_fits(req: Request, start: int, n: int) -> bool:
        """The short window starting at `start` (n tokens) still holds the cursor's line."""
        return 0 <= start <= len(req.prefix) and len(req.prefix) - start <= 1.5 * n * CHARS_PER_TOKEN

    def _short_prompt(self, req: Request, budget_ms: int) -> Prompt | None:
        """The lines nearest the cursor, as many tokens as can be read within the budget. Its
        start and size stay put while the user types on at this place, so each keystroke reads
        one or two tokens (a size that followed the measured rate would move the start)."""
        start, n = self._short.get(req.path, (-1, 0))
        fim = FAMILIES[self.family].fim
        if not self._short_window_fits(req, start, n):
            # At least MIN_SHORT_TOKENS, even over the budget: on a machine slowed by other work
            # (a slow measured rate), reading the full prompt instead held requests for seconds.
            n = max(MIN_SHORT_TOKENS, self.costs.read.tokens_within(budget_ms) if self.costs else 0)
            chars = int(n * CHARS_PER_TOKEN)
            chars -= len(suffix_window(req.suffix, chars // 4)) if fim else 0
            start = len(req.prefix) - len(short_window(req.prefix, chars))
            self._short[req.path] = (start, n)
            while len(self._short) > PINNED:
                self._short.popitem(last=False)
        suffix = suffix_window(req.suffix, int(n * CHARS_PER_TOKEN) // 4) if fim else ""
        return self._tokens(req, req.prefix[start:], suffix, [], SHORT, budget=n + n // 2)

    # -- background reading -------------------------------------------------------------
    def _schedule_ahead(self) -> None:
        if self._ahead is not None and not self._ahead_queued:
            self._ahead_queued = True
            self._pool.submit(self._read_ahead)

    def _read_ahead(self, focus: int | None = None) -> None:
        """Read the pending full prompt into the window sequence, a chunk at a time, until done,
        until a request arrives (it is resumed after that request) or until the cursor moves on
        from `focus` (a didFocus's place; else the current one)."""
        self._ahead_queued = False
        engine, tokens = self.engine, self._ahead
        stop = self._yield(self._focus if focus is None else focus)
        if engine is None or tokens is None or stop.is_set():
            return
        self.windows.prepare(engine, tokens)
        before = engine.common_prefix(tokens, WINDOW)  # what the window holds beyond it is dropped
        try:
            engine.read(tokens, stop, WINDOW, chunk=READ_CHUNK)
            self._ahead = None
        except Cancelled:
            pass
        finally:
            read = max(0, len(engine.held(WINDOW)) - before)
            self.read_ahead_tokens += read
            log.debug("read ahead: %d prompt tokens, %s", read, "paused for a request" if self._ahead else "done")

    # -- remote -----------------------------------------------------------------------
    def _complete_remote(self, remote: RemoteEngine, req: Request) -> GenerationResult:
        s = req.settings
        prefix, suffix = prefix_window(req.prefix), suffix_window(req.suffix)
        single = wants_single_line(suffix.split("\n", 1)[0], s.completion.multiline)
        stop = FAMILIES[s.model.remote.template].stop + (("\n",) if single else ())
        context = [ContextFile(o.path, o.text[-CONTEXT_CHARS:]) for o in req.others[:CONTEXT_FILES]]
        return remote.generate(prefix, suffix, req.path, context, max_tokens=s.completion.max_tokens, stop=stop,
                               budget_s=s.completion.budget_ms / 1000, cancel=req.cancel, on_text=req.on_text)

    def stop(self) -> None:
        """Ask the running work to end at its next step; does not wait."""
        self._stop.set()
        self._cancel.set()
        self._stop_reading()

    def shutdown(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._close()
