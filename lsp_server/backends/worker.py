"""Model work on the server's own single thread, never on pygls's pool.

The worker loads one completion engine (lsp_server/engines.py: the local model, or a serving
engine) and puts requests, loads and background reads in order on its thread. Several sessions
may share it (the shared server): a newer request stops its own session's running one at the
next step, and any request stops background work of every session (after-accept generations,
the rest of an answered suggestion) at its next step and a background read inside its decode.
What prompt answers a request is the planner's (prompt_plan.py); when the full prompt is read
in the background is the schedule's (read_ahead.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from lsp_server.backends.backend import Backend, Completion, Request
from lsp_server.backends.local import LocalBackend
from lsp_server.backends.read_ahead import ReadAhead
from lsp_server.settings import Settings
from prompts import ContextFile
from speculative.build_info import build_info
from speculative.errors import Cancelled

log = logging.getLogger("specfill")
# A session whose last keystroke is this recent is typing: its next one is likely to come while
# another session's prompt is read, and would wait for all of it.
TYPING_S = 0.5


def open_backend(settings: Settings, schedule: ReadAhead, warnings: list[str]) -> Backend:
    """The local model, or the remote engine the settings name."""
    if not settings.model.remote.url:
        return LocalBackend.open(settings, schedule, schedule.closing, warnings)
    from lsp_server.backends.remote import RemoteBackend, RemoteError  # httpx's memory only for a remote engine

    remote = RemoteBackend(settings)
    try:  # one that does not answer yet still gets the requests (it may be starting)
        remote.remote.probe()
    except RemoteError as exc:
        warnings.append(f"remote engine not answering yet: {exc}")
    return remote


class ModelWorker:
    """Owns the engine; a newer request cancels its session's one in flight at its next step."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specfill-model")
        self._latest: dict[object, threading.Event] = {}  # session -> its latest request's cancel
        self._typed_at: dict[object, float] = {}  # session -> its latest keystroke, while typing
        self._yielding: set[threading.Event] = set()  # background work: any request stops it
        self._yielding_lock = threading.Lock()  # the model thread drops finished work from it
        self._queued = 0  # requests submitted and not started (under _yielding_lock)
        self.schedule = ReadAhead()
        self.backend: Backend | None = None
        self.loaded = ""  # the model asked for (a path, or the remote engine), once it serves
        self.error: str | None = None
        self.warning: str | None = None  # a problem that still lets the model serve
        self._loads = 0  # submitted and not finished; requests get nothing while > 0
        self._loads_lock = threading.Lock()
        self._wanted_key: tuple | None = None  # of the latest load asked for

    @property
    def local(self) -> LocalBackend | None:
        """The local engine, when that is what serves (tests and the stats look inside it)."""
        return self.backend if isinstance(self.backend, LocalBackend) else None

    @property
    def family(self) -> str:
        return self.backend.family if self.backend else "prefix-only"

    @property
    def reading(self) -> bool:
        """A full prompt is waiting to be read in the background."""
        return self.schedule.pending is not None

    @property
    def wanted(self) -> bool:
        """Work is queued for the model thread (a request of any session, a load)."""
        return self.schedule.waiting()

    @property
    def ready(self) -> bool:
        return self._loads == 0 and self.backend is not None

    @property
    def state(self) -> str:
        if self.error:
            return "error"
        return "ready" if self.ready else "loading"

    # -- loading ----------------------------------------------------------------------
    @staticmethod
    def key(settings: Settings) -> tuple:
        """What a load depends on: sessions whose settings agree on it can share the worker."""
        m = settings.model
        return (m.path, m.draft_path, m.n_ctx, m.threads, m.weights, tuple(vars(m.remote).values()))

    def needs_reload(self, settings: Settings) -> bool:
        """Settings that ask for other models than the last load did (done or queued)."""
        return self.key(settings) != self._wanted_key

    def load(self, settings: Settings) -> Future[str]:
        """Load (or reload) the models; the future's result is what serves."""
        with self._loads_lock:
            self._loads += 1
        self._wanted_key = self.key(settings)
        self._cancel_for(everything=True)
        future = self._pool.submit(self._load, settings)
        future.add_done_callback(self._loaded)
        return future

    def _loaded(self, _: Future) -> None:
        with self._loads_lock:
            self._loads -= 1

    def _load(self, settings: Settings) -> str:
        self.schedule.start()
        self.error = self.warning = None
        self._close()
        t0, warnings = time.perf_counter(), list[str]()
        try:
            self.backend = open_backend(settings, self.schedule, warnings)
        except Cancelled:  # newer settings (a model, then its draft) or a shutdown: not an error
            log.info("load of %s given up for newer settings", settings.model.path or "the embedded model")
            raise
        except Exception as exc:
            self.error = str(exc)
            log.error("%s: %s", "remote engine not usable" if settings.model.remote.url else "model not loaded", exc)
            log.debug("load failed", exc_info=exc)
            raise
        self.warning = "; ".join(warnings) or None
        if self.warning:
            log.warning("%s", self.warning)
        if (local := self.local) is not None:
            log.info("model loaded in %.1f s: %s (%s family, %s, extra buffers %s, %d threads)",
                     time.perf_counter() - t0, local.model_file, local.family, build_info()["build"],
                     "+".join(local.engine.buffer_types) or "none", local.engine.n_threads)
        else:
            log.info("completing with %s", self.backend.describe)
        self.loaded = self.backend.describe
        return self.loaded

    def _close(self) -> None:
        if self.backend is not None:
            self.backend.close()
        self.backend, self.loaded = None, ""
        self.schedule.want(None)

    # -- requests ---------------------------------------------------------------------
    def _cancel_for(self, owner: object = None, everything: bool = False) -> None:
        """What should give way to the work this is called for ends at its next step: the
        owner's running request, everyone's background work, a background read."""
        self.schedule.submit()
        stopped: list[threading.Event | None] = \
            list(self._latest.values()) if everything else [self._latest.get(owner)]
        with self._yielding_lock:
            stopped.extend(self._yielding)
            self._yielding.clear()
        for cancel in stopped:
            if cancel is not None:
                cancel.set()
        if everything:
            self._latest.clear()
        if self.backend is not None:
            self.backend.cancel_background()

    def yield_to_requests(self, cancel: threading.Event) -> None:
        """Work the user no longer waits for (the rest of an answered suggestion): any
        request, of any session, stops it, one already waiting at once."""
        with self._yielding_lock:
            if self._queued:
                cancel.set()
            elif not cancel.is_set():
                self._yielding.add(cancel)

    def complete(self, prefix: str, suffix: str, path: str, settings: Settings,
                 cancel: threading.Event | None = None,
                 on_text: Callable[[str], None] | None = None,
                 others: tuple[ContextFile, ...] = (), candidates: int = 1,
                 owner: object = None, background: bool = False) -> Future[Completion | None]:
        """Queue a generation for `owner` (a session); it supersedes the owner's running one.
        Background work (an after-accept generation) yields to any request. While another
        session types, the request reads less of its prompt before answering (prompt_plan)."""
        if not background:
            with self._yielding_lock:  # before the cancel: yield_to_requests sees one or the other
                self._queued += 1
        self._cancel_for(owner)
        cancel = cancel or threading.Event()
        typing = False
        if background:
            self.yield_to_requests(cancel)
        else:
            self._latest[owner] = cancel
            typing = self.others_typing(owner)
        req = Request(prefix, suffix, path, settings, cancel, on_text, others, candidates, typing)
        future = self._pool.submit(self._serve, req, not background)
        future.add_done_callback(lambda f: self._done(cancel, queued=not background and f.cancelled()))
        return future

    def typed(self, owner: object) -> None:
        """`owner` (a session) typed now, whether or not the model is asked (a keystroke the
        type-through cache answers counts)."""
        now = time.monotonic()  # sessions that stopped typing (or ended) drop out
        self._typed_at = {o: t for o, t in self._typed_at.items() if now - t < TYPING_S}
        self._typed_at[owner] = now

    def others_typing(self, owner: object) -> bool:
        """Whether a session other than `owner` typed within TYPING_S."""
        now = time.monotonic()
        return any(o is not owner and now - t < TYPING_S for o, t in self._typed_at.items())

    def _done(self, cancel: threading.Event, queued: bool) -> None:
        with self._yielding_lock:
            self._yielding.discard(cancel)
            if queued:  # cancelled before it started (shutdown, or its caller): it waits no more
                self._queued -= 1

    def read_ahead(self, prefix: str, suffix: str, path: str, settings: Settings,
                   others: tuple[ContextFile, ...] = ()) -> None:
        """The cursor rests here: read this place's full prompt while idle (specfill/didFocus)."""
        focus = self.schedule.moved()  # a read of the place the cursor left ends now
        if self.backend is not None:
            self.backend.cancel_background()
        req = Request(prefix, suffix, path, settings, threading.Event(), None, others)
        self._pool.submit(self._focus, req, focus)

    def _focus(self, req: Request, focus: int) -> None:
        if (local := self.local) is not None:
            local.focus(req, focus)

    def _serve(self, req: Request, request: bool = True) -> Completion | None:
        if request:
            with self._yielding_lock:
                self._queued -= 1
        self.schedule.start()
        try:
            return self.backend.complete(req) if self.backend is not None else None
        finally:
            if self.local is not None and self.schedule.take():
                self._pool.submit(self._read_pending)

    def _read_pending(self) -> None:
        if (local := self.local) is not None:
            local.read_pending()

    def stats(self) -> dict:
        """The engine's figures for `specfill/stats`, with the fields every engine reports."""
        out: dict = {"model": self.loaded, "family": self.family, "state": self.state, "error": self.error,
               "draft_model": None, "decode_steps": 0, "model_file": "", "extra_buffers": [], "prompt_tok_s": 0.0,
               "decode_threads": 0, "warm_places": {"saved": 0, "mb": 0.0, "loads": 0}, "read_ahead_tokens": 0,
               "remote": None}
        return out | (self.backend.stats() if self.backend is not None else {})

    def stop(self) -> None:
        """Ask the running work to end at its next step; does not wait."""
        self.schedule.closing.set()
        self._cancel_for(everything=True)

    def shutdown(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._close()
