"""From a cursor position to a suggestion: cache, debounce, supersede, early answer.

A request is answered, in order of preference: from the type-through cache (the user typed
what the last suggestion said); by an in-flight generation that still agrees with what was
typed; or by a new generation, answered as soon as its first line is complete, or with the
text so far PARTIAL_MS after its first visible text (a long line would otherwise arrive after the next
keystroke), or at once when other work waits for the model; the rest is generated in the
background into the cache. A keystroke the model has shown nothing for within WORD_AFTER_MS
(still reading) gets the word the file's words say is being typed, and the model's line later.
An answer cut short of its line is followed, once the line is whole,
by a word to the editor (`grew`) to ask again, which the cache answers at once: a user who
pauses sees the whole line without typing on. Once a suggestion is complete and shown, what
would follow it if it were accepted is generated into the cache too (completion.afterAccept),
so Tab and a pause show the next one at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lsp_server.postprocess import Suggestion, for_cursor
from lsp_server.session.cache import Entry, TypeThroughCache
from lsp_server.session.controls import refusal, suggestions_allowed
from lsp_server.session.stats import Stats
from lsp_server.settings import Settings
from lsp_server.words import expected_word

log = logging.getLogger("specfill")
RELATED_BY_CHARS = 600  # text before the cursor that picks related workspace files
PARTIAL_MS = 20  # after the first visible text, answer with what there is rather than wait for the line's end
# A model still reading when the next keystroke is near: the word the file's words say is being typed
WORD_AFTER_MS = 40


@dataclass(frozen=True)
class Place:
    """The place being completed: its document, and the text before and after the cursor."""

    uri: str
    path: str
    prefix: str
    suffix: str
    language: str = ""  # the document's language id


def first_complete_line(text: str) -> str | None:
    """Text up to the end of its first non-blank complete line, or None if there is none yet."""
    lines = text.split("\n")
    for i, ln in enumerate(lines[:-1]):
        if ln.strip():
            return "\n".join(lines[: i + 1])
    return None


@dataclass
class Inflight:
    prefix: str
    suffix: str
    cancel: threading.Event
    future: asyncio.Future
    text: str = ""
    first_line: asyncio.Event = field(default_factory=asyncio.Event)  # a line is complete, or PARTIAL_MS passed
    partial_armed: bool = False  # PARTIAL_MS runs from its first visible text
    partial: bool = False  # answered before its first line was whole: the editor is told when it is
    grown: bool = False  # ...once
    asked: float | None = None  # when the keystroke it answers a stub for came (perf_counter)
    waiters: int = 0  # requests waiting on it; a cancelled one stops it only if it was the last

    def agrees_with(self, prefix: str, suffix: str) -> bool:
        """Still useful for a request at `prefix`: the user typed what it is generating."""
        if self.future.done() or self.cancel.is_set() or suffix != self.suffix or not prefix.startswith(self.prefix):
            return False  # a cancelled flight is ending with what it has: joining it would give nothing
        typed = prefix[len(self.prefix):]
        if typed and not self.text:
            # Nothing generated yet says nothing about what was typed since; joining a flight
            # about to end empty left that keystroke with nothing (a ready "ese" after "Th").
            return False
        return self.text.startswith(typed) or typed.startswith(self.text)


class Pipeline:
    def __init__(self, worker, others: Callable[[str, str, Settings], tuple] = lambda uri, near, settings: (),
                 grew: Callable[[str], None] = lambda uri: None) -> None:
        self.worker = worker
        self.others = others  # (uri, text near the cursor, settings) -> context files, most useful first
        self.grew = grew  # (uri): a suggestion answered in part has its whole line now; ask again
        self.cache = TypeThroughCache()
        self.stats = Stats()
        self._latest: dict[str, int] = {}
        self._inflight: dict[str, Inflight] = {}
        self._told: str | None = None  # the last failure the editor was told of, until a success

    def accepted(self, length: int) -> None:
        self.stats.accepted += 1
        self.stats.accepted_chars += max(0, length)

    async def suggest(self, at: Place, settings: Settings, invoked: bool,
                      tell: Callable[[str], None]) -> Suggestion | None:
        return await self._counted(self._suggest(at, settings, invoked, tell))

    async def _counted(self, work):
        """Await one request's work, counting it, its latency and its cancellation."""
        self.stats.requests += 1
        t0 = time.perf_counter()
        try:
            return await work
        except asyncio.CancelledError:
            self.stats.cancelled += 1
            raise
        finally:
            self.stats.latency_ms.append((time.perf_counter() - t0) * 1000)

    def _finish(self, at: Place, text: str, settings: Settings) -> Suggestion | None:
        s = for_cursor(text, at.prefix, at.suffix, at.path, settings.completion.multiline)
        return s if s.text else None

    def reset(self) -> None:
        """New settings: suggestions cached under the old ones (length, multiline) are stale."""
        self.cache = TypeThroughCache()
        self._inflight.clear()  # running generations finish, but no new request joins them

    async def _suggest(self, at: Place, settings: Settings, invoked: bool,
                       tell: Callable[[str], None]) -> Suggestion | None:
        t0 = time.perf_counter()
        if (why := refusal(settings, at.path, at.language, invoked)) is not None:
            log.debug("nothing asked at %s: %s", at.path, why)
            return None
        self.worker.typed(self)
        rest = self.cache.lookup(at.uri, at.prefix, at.suffix)
        if rest is not None and (s := self._finish(at, rest, settings)) is not None:
            self.stats.cache_hits += 1
            self._go_on(at, rest, settings, tell)
            return s
        flight = self._inflight.get(at.uri)
        if flight is not None and flight.agrees_with(at.prefix, at.suffix):
            self.stats.cache_hits += 1
            waits = not flight.first_line.is_set()  # a wait for the model, as a new suggestion is
            if (s := await self._answer(flight, at, settings, flight.prefix, not invoked)) is not None and waits:
                self.stats.new_suggestion_ms.append((time.perf_counter() - t0) * 1000)
            return s
        n = self._latest[at.uri] = self._latest.get(at.uri, 0) + 1
        if not invoked and settings.completion.debounce_ms:
            await asyncio.sleep(settings.completion.debounce_ms / 1000)
            if self._latest.get(at.uri) != n:
                return None  # a newer keystroke in this document took over
        if not self.worker.ready:
            return None
        flight = self._start(at, settings, tell)
        if (s := await self._answer(flight, at, settings, at.prefix, not invoked)) is not None:
            self.stats.new_suggestion_ms.append((time.perf_counter() - t0) * 1000)
        return s

    async def suggest_candidates(self, at: Place, settings: Settings,
                                 tell: Callable[[str], None]) -> list[Suggestion]:
        """An explicit request: the greedy suggestion, then up to completion.candidates - 1
        others branched from its first token's alternatives; distinct, best first."""
        return await self._counted(self._candidates(at, settings, tell))

    async def _candidates(self, at: Place, settings: Settings, tell: Callable[[str], None]) -> list[Suggestion]:
        if not suggestions_allowed(settings, at.path, at.language, True) or not self.worker.ready:
            return []
        self._latest[at.uri] = self._latest.get(at.uri, 0) + 1
        flight = self._start(at, settings, tell, settings.completion.candidates)
        try:
            result = await asyncio.shield(flight.future)
        except asyncio.CancelledError:
            flight.cancel.set()
            raise
        except Exception:
            return []
        out: list[Suggestion] = []
        for text in [result.text, *result.alternatives] if result is not None else []:
            s = self._finish(at, text, settings)
            if s is not None and all(s.text != o.text for o in out):
                out.append(s)
        return out

    def _start(self, at: Place, settings: Settings, tell: Callable[[str], None],
               candidates: int = 1) -> Inflight:
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        entry = self.cache.put(at.uri, at.prefix, at.suffix, "", done=False)

        def on_text(text: str) -> None:  # on the model thread
            entry.text = flight.text = text
            if flight.partial and not flight.grown and first_complete_line(text) is not None:
                flight.grown = True
                loop.call_soon_threadsafe(self._grown, at.uri, entry, flight.asked)
            if flight.first_line.is_set():
                return
            shown = text.split("\n", 1)[0].strip()  # what an answer now would show
            if first_complete_line(text) is not None or (self.worker.wanted and shown):
                # A line to show; or, as the model's next work waits for the rest, what there is.
                loop.call_soon_threadsafe(flight.first_line.set)
            elif shown and not flight.partial_armed:
                # Its first visible text (not the spaces before it, which would show as nothing).
                flight.partial_armed = True
                loop.call_soon_threadsafe(loop.call_later, PARTIAL_MS / 1000, flight.first_line.set)

        others = self.others(at.uri, at.prefix[-RELATED_BY_CHARS:], settings)
        future = asyncio.wrap_future(self.worker.complete(at.prefix, at.suffix, at.path, settings, cancel, on_text,
                                                          others, candidates, owner=self))
        flight = Inflight(at.prefix, at.suffix, cancel, future)
        self._inflight[at.uri] = flight

        future.add_done_callback(lambda f: self._finished(f, flight, at, entry, settings, tell, candidates))
        return flight

    def _finished(self, f: asyncio.Future, flight: Inflight, at: Place, entry: Entry, settings: Settings,
                  tell: Callable[[str], None], candidates: int) -> None:
        """A generation ended: into the cache and stats; the editor told if it grew; what follows."""
        if self._inflight.get(at.uri) is flight:
            del self._inflight[at.uri]
        if f.cancelled() or f.exception() is not None:
            if not f.cancelled():
                self._failed(f.exception(), at, tell)
            self.cache.drop(at.uri)
            return
        self._told = None
        result = f.result()
        if result is None:
            return
        entry.text, entry.done, entry.cut = result.text, True, result.stop_reason == "cancelled"
        self.stats.generation(result)
        if flight.partial and not flight.grown:  # it ended before its line did, longer than answered
            flight.grown = True
            self._grown(at.uri, entry, flight.asked)
        # Idle, and no full prompt left to read (that matters more than a guess ahead).
        if candidates == 1 and settings.completion.after_accept and result.stop_reason != "cancelled" \
                and not result.short and self._inflight.get(at.uri) is None and not self.worker.reading:
            _after_accept(self, at, entry, settings, result.stop_reason in ("stop", "eog"))

    def _go_on(self, at: Place, rest: str, settings: Settings, tell: Callable[[str], None]) -> None:
        """The cache answered with a stub (its generation was stopped before its line was
        whole): generate here in the background; the line, once whole, goes as a refresh."""
        entry = self.cache.current(at.uri)
        if entry is None or not (entry.done and entry.cut) or first_complete_line(rest) is not None \
                or at.uri in self._inflight or not self.worker.ready:
            return
        flight = self._start(at, settings, tell)  # the next keystroke supersedes it, as any
        flight.partial, flight.asked = True, time.perf_counter()

    def _grown(self, uri: str, entry: Entry, asked: float | None = None) -> None:
        """Tell the editor an answer in part grew, unless a new request replaced its cache entry;
        a stub's whole line is a new suggestion, `asked` ago."""
        if self.cache.current(uri) is entry:
            self.stats.grown += 1
            if asked is not None:
                self.stats.new_suggestion_ms.append((time.perf_counter() - asked) * 1000)
            self.grew(uri)

    def _failed(self, exc: BaseException | None, at: Place, tell: Callable[[str], None]) -> None:
        self.stats.errors += 1
        message = f"completion failed: {exc}"
        log.error("%s", message)
        log.debug("completion failed at %s", at.path, exc_info=exc)
        if message != self._told:  # an engine that is down fails every keystroke: say it once
            tell(message)
        self._told = message

    async def _answer(self, flight: Inflight, at: Place, settings: Settings, since: str,
                      words: bool = False) -> Suggestion | None:
        """Wait for the flight's first line (or its end) and shape it for a request at `at`.
        With `words` (a keystroke's request, not an explicit one, which wants the model's), if
        the flight has shown nothing WORD_AFTER_MS on and the file's words say which word is
        being typed: that word, and the flight's line refreshes the editor once whole."""
        waiter = asyncio.ensure_future(flight.first_line.wait())
        flight.waiters += 1
        word = ""
        try:
            done, _ = await asyncio.wait({flight.future, waiter}, timeout=WORD_AFTER_MS / 1000 if words else None,
                                         return_when=asyncio.FIRST_COMPLETED)
            if not done and not (word := expected_word(at.prefix, at.suffix)):
                await asyncio.wait({flight.future, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            if flight.waiters == 1:
                flight.cancel.set()  # $/cancelRequest: stop decoding at the next step
            raise
        finally:
            flight.waiters -= 1
            waiter.cancel()
        if word:
            flight.partial = True
            self.stats.word_answers += 1
            return self._finish(at, word, settings)
        if flight.future.done():
            if flight.future.cancelled() or flight.future.exception() is not None:
                return None
            result = flight.future.result()
            text = result.text if result is not None else ""
        else:
            line = first_complete_line(flight.text)
            flight.partial = flight.partial or line is None
            text = line or flight.text.split("\n", 1)[0]
            if flight.waiters == 0:  # answered: the rest goes to the cache, behind anyone's request
                self.worker.yield_to_requests(flight.cancel)
        typed = at.prefix[len(since):]
        if not text.startswith(typed):
            return None
        return self._finish(at, text[len(typed):], settings)


def _after_accept(pipeline: Pipeline, at: Place, entry: Entry, settings: Settings, ended: bool) -> None:
    """Generate what follows the shown suggestion as if it were accepted, into its cache
    entry; any request stops it at the next step (the worker's supersede). `ended`: the
    generation stopped where the model ended the suggestion (a stop string, end of text)."""
    shown = pipeline._finish(at, entry.text, settings)
    backend = pipeline.worker.backend
    if shown is None or shown.replace_chars or not (backend and backend.reads_ahead):
        return
    accepted, shown_text = at.prefix + shown.text, shown.text
    if ended or entry.text[len(shown_text):].startswith("\n"):
        # The model ended its line there: read again, the line's last word may go another
        # way and continue it, which this place (asked again, or typed partway) must not show.
        entry.until = len(shown_text)

    def on_text(text: str) -> None:  # on the model thread
        if pipeline.cache.current(at.uri) is entry:
            entry.text = shown_text + text

    def done(f) -> None:
        result = None if f.cancelled() or f.exception() is not None else f.result()
        if result is not None and result.stop_reason == "cancelled":
            pipeline.stats.superseded += 1  # a request came first, as it should
        elif result is not None and result.text:
            pipeline.stats.after_accept += 1

    others = pipeline.others(at.uri, accepted[-RELATED_BY_CHARS:], settings)
    pipeline.worker.complete(accepted, at.suffix, at.path, settings, threading.Event(), on_text,
                         others, owner=pipeline, background=True).add_done_callback(done)
