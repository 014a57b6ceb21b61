"""The model in this process: prompts planned, places kept warm, decoding with speculation.

Every method runs on the worker's model thread, except `cancel_background`. A request is answered
from the prompt the planner chooses; the full prompt it did not read is read in the
background between requests (`read_pending`), and places the user left stay warm as copies
of their KV cache (speculative/warm_places.py), so coming back reads nothing again.
"""

from __future__ import annotations

import logging
import threading
import time

from lsp_server.backends.backend import Completion, Request
from lsp_server.backends.prompt_plan import MIN_SHORT_TOKENS, READ_CHUNK, Prompt, PromptPlanner, least_short
from lsp_server.backends.read_ahead import ReadAhead
from lsp_server.models.catalog import model_path
from lsp_server.settings import Settings
from lsp_server.words import complete_word
from prompts import family_for
from speculative import Engine, GenerationResult, ModelError
from speculative.build_info import build_info
from speculative.candidates import branch
from speculative.convert import weights_path
from speculative.cost_model import CostModel, ReadRate, load_cost_model
from speculative.cpu_share import CpuShare
from speculative.decode import Aids, Decoding, clamp_max_tokens, generate
from speculative.drafters import Auto, Drafter, DraftModel, PromptLookup
from speculative.engine import CancelFlag
from speculative.errors import Cancelled
from speculative.heal import PieceIndex
from speculative.seqs import FULL
from speculative.warm_places import WarmPlaces

log = logging.getLogger("specfill")

LOOKUP_FILES = 4  # context files prompt lookup may copy from
LOOKUP_CHARS = 8000  # of each, for prompt lookup
SUFFIX_LOOKUP_CHARS = 4000  # of the text after the cursor, for prompt lookup
DRAFT_ANSWERS_FASTER = 2.0  # the draft answers for the target only when it reads this many times faster


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


def open_draft(settings: Settings, target: Engine, stop: threading.Event, warnings: list) -> DraftModel | None:
    """The draft model `model.draftPath` names, or None (said in `warnings` when it fails)."""
    m = settings.model
    if not m.draft_path:
        return None
    engine = None
    try:
        source = model_path(m.draft_path)
        engine, _ = open_engine(source, m.weights, m.n_ctx, m.threads or None, warnings)  # weights as the target's
        costs = load_cost_model(engine, engine.n_threads, build_info()["build"], stop=stop)
        return DraftModel(engine, target, costs, source=str(source))
    except (ModelError, OSError) as exc:
        if engine is not None:
            engine.close()
        warnings.append(f"draft model not used: {exc}")
        return None


class LocalBackend:
    """A `Backend` on a model loaded here."""

    reads_ahead = True

    def __init__(self, engine: Engine, costs: CostModel, draft: DraftModel | None, source: str,
                 schedule: ReadAhead, share: CpuShare | None = None) -> None:
        self.engine, self.costs, self.draft = engine, costs, draft
        self.share = share  # None: the thread count the settings name, always
        self.family = family_for(engine)
        self.describe = source  # the model asked for; `model_file` is what was loaded for it
        self.model_file = str(engine.path)
        self.lookup = PromptLookup()
        self.places = WarmPlaces()
        # The token index for healing: built once, at load, not mid-typing.
        self.planner = PromptPlanner(engine, self.family, engine.n_ctx, PieceIndex(engine.pieces()))
        self.schedule = schedule
        self.read_ahead_tokens = 0  # prompt tokens read in the background, ever
        engine.on_read = costs.read.observe  # real reads keep the read rate current
        if draft is not None:  # the draft's too: whether it answers for the target compares the two
            draft.engine.on_read = draft.costs.read.observe

    @classmethod
    def open(cls, settings: Settings, schedule: ReadAhead, stop: threading.Event,
             warnings: list[str]) -> LocalBackend:
        m = settings.model
        source = model_path(m.path)
        engine, _ = open_engine(source, m.weights, m.n_ctx, m.threads or None, warnings)
        try:
            costs = load_cost_model(engine, engine.n_threads, build_info()["build"], stop=stop)
        except BaseException:
            engine.close()
            raise
        if costs.not_saved:
            warnings.append(costs.not_saved)
        return cls(engine, costs, open_draft(settings, engine, stop, warnings), str(source), schedule,
                   None if m.threads else CpuShare())

    # -- requests -------------------------------------------------------------------
    def complete(self, req: Request) -> Completion | None:
        if req.cancel.is_set():
            return None
        self._fit_threads()
        full = self.planner.full(req)
        if full is None:
            return None
        held = self.places.prepare(self.engine, full.tokens)
        short_held = self.engine.held(self.planner.short_seq(req.path))
        prompt, short = self.planner.choose(req, full, held, self.costs.read, short_held,
                                            others_waiting=self.schedule.waiting() or req.others_typing,
                                            least=least_short(self._short_reader()))
        if short:
            self.schedule.want(full.tokens)  # read in the background, so the next keystrokes use it
            # What the full sequence holds beyond this prompt is another place's (saved by prepare if
            # worth it): attention spans every used cell, so it would slow the short read.
            self.engine.truncate(held, FULL)
        else:
            # A read left pending for the place before would evict this one between keystrokes.
            self.schedule.want(None)
        engine = self.draft.engine if self.draft is not None and short and self._draft_answers(req, prompt) \
            else self.engine
        engine.make_room(prompt.seq, len(prompt.tokens) + clamp_max_tokens(req.settings.completion.max_tokens,
                                                                             engine.n_ctx))
        cpu0 = time.thread_time()
        result = self._generate(req, prompt, engine)
        text, reason = result.text, result.stop_reason
        if reason == "confidence" and (word := complete_word(text, req.prefix, req.suffix)):
            text, reason = word, "word"  # the model doubted mid-word: the file's word decides
        alternatives = self._alternatives(req, prompt, result, engine)
        if alternatives is None:
            alternatives, reason = [], "cancelled"  # stopped while branching: counts as superseded
        done = Completion.of(result, short=short, by_draft=engine is not self.engine, alternatives=alternatives,
                             cpu_ms=(time.thread_time() - cpu0) * 1000)
        done.text, done.stop_reason = text, reason
        _log_generation(done)
        return done

    def _short_reader(self) -> ReadRate:
        """The read rate of the model a short prompt is read by: the draft answers for a
        target that reads slower than it (`_draft_answers`), so its rate sizes the prompt."""
        target = self.costs.read
        if self.draft is None or self.draft.costs.read.ms(0, MIN_SHORT_TOKENS) >= target.ms(0, MIN_SHORT_TOKENS):
            return target
        return self.draft.costs.read

    def _draft_answers(self, req: Request, prompt: Prompt) -> bool:
        """Whether the draft model answers from the short prompt: when the target cannot read
        even that within the prompt budget (a heavy target, a place just landed on) and the
        draft reads it in well under the target's time. Its sequence for the place then stays
        cold in the target, so the draft answers there until the full prompt is read."""
        if self.draft is None:
            return False
        n = len(prompt.tokens)
        target_at = self.engine.common_prefix(prompt.tokens, prompt.seq)
        draft_at = self.draft.engine.common_prefix(prompt.tokens, prompt.seq)
        target_ms = self.costs.read.ms(target_at, n - target_at)
        draft_ms = self.draft.costs.read.ms(draft_at, n - draft_at)
        return target_ms > req.settings.completion.prompt_budget_ms and DRAFT_ANSWERS_FASTER * draft_ms < target_ms

    def _generate(self, req: Request, prompt: Prompt, engine: Engine) -> GenerationResult:
        """Generate on the target, speculating as the settings say; on the draft model (it
        answers while the target reads), plainly: it is the cheap one."""
        s = req.settings
        sources = [engine.tokenize(req.suffix[:SUFFIX_LOOKUP_CHARS], parse_special=False)]  # worth copying
        sources += [engine.tokenize(o.text[-LOOKUP_CHARS:], parse_special=False)
                    for o in req.others[:LOOKUP_FILES]]
        decoding = Decoding(max_tokens=clamp_max_tokens(s.completion.max_tokens, engine.n_ctx),
                            stop=prompt.stop, budget_s=s.completion.budget_ms / 1000,
                            min_confidence=s.completion.min_confidence, max_draft=s.speculation.max_draft,
                            seq=prompt.seq)
        on_target = engine is self.engine
        aids = Aids(drafter=self.drafter(s.speculation.method) if on_target else None,
                    costs=self.costs if on_target else None, extra_sources=sources,
                    heal=self.planner.heal(prompt.heal), index=self.planner.pieces, cancel=req.cancel,
                    on_text=req.on_text)
        return generate(engine, prompt.tokens, decoding, aids)

    def _alternatives(self, req: Request, prompt: Prompt, result: GenerationResult,
                      engine: Engine) -> list[str] | None:
        """Other candidates about as long as the greedy one, all advancing in one batch a
        token; None when a cancel stopped the branching."""
        if req.candidates <= 1 or not result.tokens or req.cancel.is_set():
            return []
        max_tokens = clamp_max_tokens(req.settings.completion.max_tokens, engine.n_ctx)
        alts = branch(engine, prompt.tokens, req.candidates - 1, min(max_tokens, len(result.tokens) + 4),
                      prompt.stop, exclude=[result.tokens[0]], cancel=req.cancel,
                      heal=self.planner.heal(prompt.heal), seq=prompt.seq)
        return None if req.cancel.is_set() else [text for _, text in alts]

    def drafter(self, method: str) -> Drafter | None:
        if method == "off":
            return None
        if method == "lookup":
            return self.lookup
        if method == "draft":
            return self.draft
        return Auto(self.lookup, self.draft)

    # -- reading while idle -------------------------------------------------------------
    def focus(self, req: Request, focus: int) -> None:
        """The cursor rests at `req`'s place (didFocus): read its full prompt now, unless a
        request or another didFocus came first."""
        if self.schedule.read_cancel(focus).is_set():
            log.debug("didFocus: a request came first, not reading ahead at %s (offset %d)", req.path, len(req.prefix))
            return
        log.debug("didFocus: reading ahead at %s (offset %d)", req.path, len(req.prefix))
        full = self.planner.full(req)
        if full is not None:
            self.schedule.want(full.tokens)
        self.read_pending(self.schedule.read_cancel(focus))

    def read_pending(self, stop: CancelFlag | None = None) -> None:
        """Read the pending full prompt into the full prompt's sequence, a chunk at a time, until
        done or until `stop` (a request arrived: it is resumed after it; the cursor moved)."""
        tokens = self.schedule.begin()
        stop = stop or self.schedule.read_cancel()
        if tokens is None or stop.is_set():
            return
        self._fit_threads()
        self.places.prepare(self.engine, tokens)
        self.engine.make_room(FULL, len(tokens))
        before = self.engine.common_prefix(tokens, FULL)  # what the sequence holds beyond it is dropped
        try:
            self.engine.read(tokens, stop, FULL, chunk=READ_CHUNK)
            if self.draft is not None:  # the draft's too: a draft step then reads one token, not the prompt
                self.draft.read(tokens, stop, chunk=READ_CHUNK)
            self.schedule.want(None)
        except Cancelled:
            pass
        finally:
            read = max(0, len(self.engine.held(FULL)) - before)
            self.read_ahead_tokens += read
            log.debug("read ahead: %d prompt tokens, %s", read,
                      "paused for a request" if self.schedule.pending else "done")

    def _fit_threads(self) -> None:
        """Fewer decode threads while other processes keep cores busy (speculative/cpu_share.py)."""
        if self.share is not None:
            n = self.share.threads(self.engine.n_threads)
            if n != self.engine.threads_now:
                log.debug("decode threads %d -> %d: other processes keep %.1f cores busy", self.engine.threads_now, n,
                          self.share.last or 0.0)
            for engine in (self.engine, self.draft.engine if self.draft else None):
                if engine is not None:
                    engine.use_threads(n)

    def cancel_background(self) -> None:
        """A background read stops inside its decode, not at the end of its chunk."""
        self.engine.abort_read()
        if self.draft is not None:
            self.draft.engine.abort_read()

    # -- the rest -----------------------------------------------------------------------
    def prompt_tok_s(self) -> float:
        """Tokens a second a prompt is read at from its start, for the stats."""
        n = READ_CHUNK * 8
        return 1000 * n / max(self.costs.read.ms(0, n), 1e-6)

    def stats(self) -> dict:
        e = self.engine
        return {"draft_model": self.draft.source if self.draft else None,
                "draft": self.draft.stats(self.costs) if self.draft else None, "decode_steps": e.decode_steps,
                "model_file": self.model_file, "extra_buffers": list(e.buffer_types),
                "prompt_tok_s": self.prompt_tok_s(), "read_ahead_tokens": self.read_ahead_tokens,
                "decode_threads": e.threads_now,
                "warm_places": {"saved": len(self.places), "mb": self.places.bytes / 2**20,
                                 "loads": self.places.loads}}

    def close(self) -> None:
        self.places.clear()
        self.planner.forget()
        for engine in (self.engine, self.draft.engine if self.draft else None):
            if engine is not None:
                engine.close()


def _log_generation(r: Completion) -> None:
    log.debug("generation: %s prompt%s %d tokens (%d reused)%s, %d tokens (%d replayed), drafted %d accepted %d, "
              "stop %s, ttft %.0f ms, total %.0f ms", "short" if r.short else "full",
              " (the draft model answered)" if r.by_draft else "", r.n_prompt, r.n_reused,
              f", healed {r.healed!r}" if r.healed else "", len(r.tokens), r.replayed, r.drafted, r.accepted,
              r.stop_reason, r.ttft_ms, r.total_ms)
