"""Which prompt answers a request: the full one, or a short one of the lines nearest the cursor.

The rule (`PromptPlanner.choose`): the full prompt when what the engine does not hold of it
can be read within `completion.promptBudgetMs`; else a short prompt, as many tokens as that
budget reads, on a sequence of its own, answering one line while the full prompt is read in
the background. Typing on where the short prompt answers, it keeps answering until at most a
chunk of the full one is left unread. The places typed at most recently each keep their
short prompt in a sequence of their own, so two windows typing at once do not read theirs anew
at each other's keystrokes. Context from other files is pinned per place, so edits
elsewhere do not make a place's prompt new again. Needs a tokenizer, not a model.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lsp_server.backends.backend import Request
from lsp_server.postprocess import wants_single_line
from prompts import FAMILIES, ContextFile, PromptError, build_prompt, prompt_tokens
from prompts.excerpt import nearest_lines, other_files_excerpt, prefix_excerpt, suffix_excerpt
from prompts.heal import heal_last_tokens, heal_split
from speculative.cost_model import ReadRate
from speculative.decode import clamp_max_tokens
from speculative.engine import common_prefix
from speculative.heal import Heal, PieceIndex
from speculative.seqs import FULL, SHORT, SHORT_SEQS
from speculative.vocab import Vocab

READ_CHUNK = 32  # tokens a background read evaluates between looks at waiting requests (one ubatch)
MIN_SHORT_TOKENS = 48  # the least a short prompt holds: fewer say too little
# ... unless the model reads them slowly (a user's own model, many times the embedded one):
# then what it reads in SHORT_LEAST_MS, and never fewer than LEAST_SHORT_TOKENS.
SHORT_LEAST_MS, LEAST_SHORT_TOKENS = 300.0, 24
CHARS_PER_TOKEN = 2.5  # of code, on the low side: a short prompt of N tokens' chars stays under N
PINNED = 16  # places whose context (and short prompt start) stays pinned


@dataclass(frozen=True)
class Prompt:
    """What one request asks the local model, full or short."""

    tokens: list[int]
    stop: tuple[str, ...]
    heal: bytes  # the text before the cursor the model writes again (token healing)
    seq: int  # the engine's sequence it is read into


class PromptPlanner:
    def __init__(self, vocab: Vocab, family: str, n_ctx: int, pieces: PieceIndex) -> None:
        self.vocab, self.family, self.n_ctx, self.pieces = vocab, family, n_ctx, pieces
        self._all_pieces = vocab.pieces()
        self._pins: OrderedDict[tuple[str, int, int], tuple[ContextFile, ...]] = OrderedDict()
        self._short: OrderedDict[str, tuple[int, int]] = OrderedDict()  # path -> short prompt (start offset, tokens)
        self._short_seqs: OrderedDict[str, int] = OrderedDict()  # path -> its short prompt's sequence

    def choose(self, req: Request, full: Prompt, held: int, rate: ReadRate,
               short_held: Sequence[int], others_waiting: bool = False,
               least: int = MIN_SHORT_TOKENS) -> tuple[Prompt, bool]:
        """(the prompt to answer from, whether it is the short one). `held`: tokens of the
        full prompt the engine holds; `short_held`: what the place's short sequence
        (`short_seq`) holds. With `others_waiting` (requests queued behind this one, or another
        session typing, whose next keystroke would be) the wait allowed is a quarter: their
        wait is this read too. `least`: what a short prompt holds at least (`least_short`)."""
        budget = req.settings.completion.prompt_budget_ms
        if others_waiting:
            budget //= 4
        unread = len(full.tokens) - held
        quick = None
        if budget and rate.ms(held, unread) > budget:
            quick = self.short(req, rate.tokens_within(budget), least)
        elif budget and unread > READ_CHUNK:
            # Typing on where a short prompt already answers costs a token or two there;
            # reading the rest of the full prompt now, even within the budget, would miss.
            quick = self.warm_short(req, rate.tokens_within(budget), short_held, least)
        if quick is None or len(quick.tokens) >= unread:
            return full, False
        return replace(quick, stop=quick.stop + ("\n",)), True  # one line, then back to the full prompt

    def full(self, req: Request) -> Prompt | None:
        c = req.settings.context
        prefix, suffix = prefix_excerpt(req.prefix, c.prefix_chars), suffix_excerpt(req.suffix, c.suffix_chars)
        return self._tokens(req, prefix, suffix, self._context(req, prefix), FULL)

    def short(self, req: Request, budget_tokens: int, least: int = MIN_SHORT_TOKENS) -> Prompt | None:
        """The lines nearest the cursor, about `budget_tokens`. Its start and size stay put
        while the user types on at this place, so each keystroke reads one or two tokens."""
        start, n = self._short.get(req.path, (-1, 0))
        if not _short_start_fits(req, start, n):
            # At least `least` even over the budget: on a machine slowed by other work,
            # reading the full prompt instead held requests for seconds.
            n = max(least, budget_tokens)
            start = self._pin_short(req, n, int(n * CHARS_PER_TOKEN) - len(self._short_suffix(req, n)))
        prompt = self._short_prompt(req, start, n)
        while prompt is not None and len(prompt.tokens) >= n + n // 2 and len(req.prefix) - start > 1:
            # Denser text than CHARS_PER_TOKEN (symbols, a regex): a prompt cut to fit from
            # the left would shift every token at every keystroke and be read anew each time.
            start = self._pin_short(req, n, (len(req.prefix) - start) // 2)
            prompt = self._short_prompt(req, start, n)
        return prompt

    def _pin_short(self, req: Request, n: int, chars: int) -> int:
        """Where the short prompt of `req`'s place starts from now on: at most `chars` of the
        text before the cursor, from a line start where there is one."""
        start = len(req.prefix) - len(nearest_lines(req.prefix, chars))
        self._short[req.path] = (start, n)
        self._short.move_to_end(req.path)
        while len(self._short) > PINNED:
            self._short.popitem(last=False)
        return start

    def _short_prompt(self, req: Request, start: int, n: int) -> Prompt | None:
        return self._tokens(req, req.prefix[start:], self._short_suffix(req, n), [], self.short_seq(req.path),
                            budget=n + n // 2)

    def _short_suffix(self, req: Request, n: int) -> str:
        """The text after the cursor in a short prompt of `n` tokens: a quarter of it, at most
        context.suffixChars (none for a family without fill-in-the-middle)."""
        if not FAMILIES[self.family].fim:
            return ""
        return suffix_excerpt(req.suffix, min(int(n * CHARS_PER_TOKEN) // 4, req.settings.context.suffix_chars))

    def short_seq(self, path: str) -> int:
        """The sequence `path`'s short prompt is read into: its own while it is among the
        SHORT_SEQS places typed at most recently; a new place takes the least recent one's."""
        seqs = self._short_seqs
        if path not in seqs:
            free = set(range(SHORT, SHORT + SHORT_SEQS)) - set(seqs.values())
            seqs[path] = min(free) if free else seqs.pop(next(iter(seqs)))
        seqs.move_to_end(path)
        return seqs[path]

    def warm_short(self, req: Request, budget_tokens: int, short_held: Sequence[int],
                   least: int = MIN_SHORT_TOKENS) -> Prompt | None:
        """The short prompt of this place if the short sequence holds all but its last few
        tokens (the user types on where it answered), else None."""
        if not _short_start_fits(req, *self._short.get(req.path, (-1, 0))):
            return None
        quick = self.short(req, budget_tokens, least)
        if quick is None or len(quick.tokens) - common_prefix(short_held, quick.tokens) > READ_CHUNK // 4:
            return None
        return quick

    def forget(self) -> None:
        """Every place is new again (a test landing afresh; a reloaded model)."""
        self._pins.clear()
        self._short.clear()
        self._short_seqs.clear()

    def heal(self, text: bytes) -> Heal | None:
        """The healing constraint for `text`, when some tokens can write it again."""
        if not text:
            return None
        heal = Heal(self.pieces, self._all_pieces, text)
        return heal if heal.feasible() else None

    def _context(self, req: Request, prefix: str) -> list[ContextFile]:
        """Other files' text, pinned per place: a prompt whose context changed must be read
        again from its start, and context changes with every edit elsewhere."""
        chars = req.settings.context.other_files_chars
        key = (req.path, len(req.prefix) - len(prefix), chars)
        if key not in self._pins:
            self._pins[key] = tuple(other_files_excerpt(req.others, chars))
            while len(self._pins) > PINNED:
                self._pins.popitem(last=False)
        self._pins.move_to_end(key)
        return list(self._pins[key])

    def _heal_split(self, prefix: str) -> tuple[str, str]:
        """Where healing backs the prompt up to: the half-typed run, at most its last tokens."""
        kept, healed = heal_split(prefix)
        if not healed:
            return kept, healed
        return heal_last_tokens(kept, healed, lambda text: [self._all_pieces[t] for t in
                                                            self.vocab.tokenize(text, parse_special=False)])

    def _tokens(self, req: Request, prefix: str, suffix: str, context: list[ContextFile], seq: int,
                budget: int | None = None) -> Prompt | None:
        """The prompt's tokens, healed when the cursor ends inside a token."""
        s = req.settings
        single = wants_single_line(suffix.split("\n", 1)[0], s.completion.multiline)
        budget = budget or self.n_ctx - clamp_max_tokens(s.completion.max_tokens, self.n_ctx) - 1
        for kept, healed in ([self._heal_split(prefix)] if s.completion.heal else []) + [(prefix, "")]:
            if healed and self.heal(healed.encode()) is None:
                continue
            parts = build_prompt(self.family, kept, suffix, req.path, context=context)
            try:
                tokens = prompt_tokens(self.vocab, parts, budget)
            except PromptError:
                continue  # nothing left before a half-typed word at a file's start: no healing
            return Prompt(tokens, parts.stop + (("\n",) if single else ()), healed.encode(), seq)
        return None


def least_short(rate: ReadRate) -> int:
    """What a short prompt holds at least, read at `rate`: MIN_SHORT_TOKENS, or what is read in
    SHORT_LEAST_MS where that is fewer (a heavy model would read for most of a second before its
    first answer; docs/speculation.md), LEAST_SHORT_TOKENS at the fewest."""
    return max(LEAST_SHORT_TOKENS, min(MIN_SHORT_TOKENS, rate.tokens_within(SHORT_LEAST_MS)))


def _short_start_fits(req: Request, start: int, n: int) -> bool:
    """The short prompt starting at `start` (n tokens) still holds the cursor's line."""
    return 0 <= start <= len(req.prefix) and len(req.prefix) - start <= 1.5 * n * CHARS_PER_TOKEN
