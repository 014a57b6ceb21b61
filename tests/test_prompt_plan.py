"""The prompt planner: the full prompt when what is unread of it fits the budget, else the
lines nearest the cursor (one line, on their own sequence); a short window that stays put while
typing; context pinned per place. A real tokenizer (the default model's vocabulary) and no
model: nothing is evaluated."""

from __future__ import annotations

import argparse
import itertools
import threading
from pathlib import Path

import pytest
from test_heal import vocab as vocab_file

from lsp_server.backends.backend import Request
from lsp_server.backends.prompt_plan import (
    LEAST_SHORT_TOKENS,
    MIN_SHORT_TOKENS,
    READ_CHUNK,
    SHORT_LEAST_MS,
    PromptPlanner,
    least_short,
)
from lsp_server.settings import Settings
from prompts import ContextFile, family_for
from prompts.heal import HEAL_TOKENS
from speculative.cost_model import ReadRate
from speculative.engine import FULL, SHORT, SHORT_SEQS, common_prefix
from speculative.heal import PieceIndex
from speculative.vocab import Vocab

LONG = Path(argparse.__file__).read_text()[:20000]
RATE = ReadRate(base_ms=1.0, depth_ms=0.0)  # 300 tokens within the default budget


@pytest.fixture(scope="module")
def vocab(model_path):
    v = Vocab.load(model_path)
    yield v
    v.close()


@pytest.fixture
def planner(vocab):
    return PromptPlanner(vocab, family_for(vocab), 4096, PieceIndex(vocab.pieces()))


def request(prefix: str, budget_ms: int = 300, others: tuple[ContextFile, ...] = (), path: str = "a.py") -> Request:
    s = Settings()
    s.completion.prompt_budget_ms = budget_ms
    return Request(prefix, "", path, s, threading.Event(), others=others)


def test_a_prompt_read_within_the_budget_answers_whole(planner):
    req = request(LONG[:400])
    full = planner.full(req)
    assert planner.choose(req, full, 0, RATE, []) == (full, False)


def test_with_requests_queued_behind_it_a_prompt_gets_a_quarter_of_the_budget(planner):
    """The shared server: another window's request waits for this read too."""
    req = request(LONG[:800])
    full = planner.full(req)
    assert 75 < len(full.tokens) <= 300  # within the budget, over a quarter of it
    assert planner.choose(req, full, 0, RATE, []) == (full, False)
    prompt, short = planner.choose(req, full, 0, RATE, [], others_waiting=True)
    assert short and len(prompt.tokens) < len(full.tokens)


def test_a_prompt_over_the_budget_is_answered_one_line_from_the_nearest_lines(planner, vocab):
    req = request(LONG)
    full = planner.full(req)
    prompt, short = planner.choose(req, full, 0, RATE, [])
    assert short and prompt.seq == SHORT and full.seq == FULL and "\n" in prompt.stop
    assert MIN_SHORT_TOKENS <= len(prompt.tokens) <= 1.5 * RATE.tokens_within(300)
    # The lines just before the cursor, the half-typed word healed.
    assert LONG.endswith(vocab.detokenize(prompt.tokens[-20:]) + prompt.heal.decode())


def test_places_typed_at_in_turn_keep_their_own_short_sequence_and_a_new_one_takes_the_oldest(planner):
    assert SHORT_SEQS == 2
    prompts = {}
    for path in ("a.py", "b.py", "a.py"):
        req = request(LONG, path=path)
        prompt, short = planner.choose(req, planner.full(req), 0, RATE, [])
        assert short
        prompts.setdefault(path, set()).add(prompt.seq)
    assert prompts["a.py"] == {SHORT} and prompts["b.py"] == {SHORT + 1}
    assert planner.short_seq("c.py") == SHORT + 1, "b.py was typed at least recently"
    assert planner.short_seq("a.py") == SHORT


def test_what_the_engine_holds_is_not_read_again_and_no_budget_means_the_full_prompt(planner):
    req = request(LONG)
    full = planner.full(req)
    assert planner.choose(req, full, len(full.tokens) - 50, RATE, []) == (full, False)
    unbudgeted = request(LONG, budget_ms=0)
    assert planner.choose(unbudgeted, planner.full(unbudgeted), 0, RATE, [])[1] is False


def test_typing_on_stays_on_the_short_prompt_while_more_than_a_chunk_is_unread(planner):
    slow = ReadRate(base_ms=3.0, depth_ms=0.0)  # the short window: 100 tokens
    first, short = planner.choose(request(LONG), planner.full(request(LONG)), 0, slow, [])
    assert short
    on = request(LONG + "x")
    full = planner.full(on)
    assert planner.choose(on, full, len(full.tokens) - 200, RATE, first.tokens)[1]  # 200 would fit the budget
    assert not planner.choose(on, full, len(full.tokens) - READ_CHUNK, RATE, first.tokens)[1]


def test_the_short_window_stays_put_while_typing(planner):
    a = planner.short(request(LONG), 100)
    b = planner.short(request(LONG + "foo = 1\nba"), 100)
    assert b.tokens[: len(a.tokens) - 2] == a.tokens[: len(a.tokens) - 2]


def test_context_is_pinned_per_place_until_forgotten(planner):
    text = "def area(side):\n    return "
    one, two = (ContextFile("b.py", "x = 1\n"),), (ContextFile("b.py", "y = 2\n"),)

    def shown(others):
        req = request(text, others=others)
        req.settings.context.other_files_chars = 2000
        return planner.full(req)
    first = shown(one)
    assert shown(two).tokens == first.tokens  # an edit elsewhere changes nothing
    planner.forget()
    if planner.family != "prefix-only":  # families with file separators show context
        assert shown(two).tokens != first.tokens


def test_the_prompt_holds_as_much_before_the_cursor_and_of_other_files_as_the_settings_say(planner, vocab):
    others = (ContextFile("near.py", "A" * 3000 + "near_end = 1\n"), ContextFile("far.py", "far_end = 2\n"),
              ContextFile("third.py", "third_end = 3\n"))

    def text(prefix_chars: int, other_chars: int) -> str:
        req = request(LONG, others=others)
        req.settings.context.prefix_chars, req.settings.context.other_files_chars = prefix_chars, other_chars
        prompt = planner.full(req)
        assert prompt is not None
        return vocab.detokenize(prompt.tokens)

    small, big = text(1000, 0), text(4000, 0)
    assert len(small) <= 1100 and len(big) >= 2000  # at least half of each setting is kept
    assert small[-300:] in LONG[-1000:] and big[-300:] in LONG[-1000:]
    assert "near_end" not in big and "far.py" not in big
    if planner.family == "prefix-only":  # no file separators: other files never enter the prompt
        return
    both = text(4000, 2000)
    assert "near_end" in both and "far_end" in both and "third_end" not in both  # the two most useful
    assert "A" * 1000 not in both  # each its share, from its end


def test_no_text_after_the_cursor_when_suffix_chars_is_zero_in_the_full_or_the_short_prompt():
    """A fill-in-the-middle family (StarCoder's vocabulary: no weights needed)."""
    v = vocab_file("starcoder")
    try:
        fim = PromptPlanner(v, family_for(v), 4096, PieceIndex(v.pieces()))
        assert fim.family == "starcoder"

        def prompts(suffix_chars: int) -> tuple[str, str]:
            req = Request(LONG[:3000], "after_cursor_mark = 1\n", "a.py", Settings(), threading.Event())
            req.settings.context.suffix_chars = suffix_chars
            full, short = fim.full(req), fim.short(req, 200)
            assert full is not None and short is not None
            fim.forget()
            return v.detokenize(full.tokens), v.detokenize(short.tokens)
        assert all("after_cursor_mark" in p for p in prompts(2000))
        assert not any("after_cursor_mark" in p for p in prompts(0))
    finally:
        v.close()


def test_a_half_typed_word_is_written_again_by_the_model(planner):
    prompt = planner.full(request("def area(width, height):\n    return wi"))
    assert prompt.heal.strip() == b"wi" and planner.heal(prompt.heal) is not None


def test_typing_on_in_a_long_word_the_prompt_takes_what_is_typed_and_heals_its_last_tokens(planner, vocab):
    """A healed token is generated again at every keystroke: a long half-typed name is read into
    the prompt, all but its last two tokens, which stay healed."""
    word = "LiterateHaskellLexer"
    before = LONG[:400] + "\n    return "
    heals = []
    for n in range(1, len(word) + 1):
        full = planner.full(request(before + word[:n]))
        assert vocab.detokenize(full.tokens).endswith((before + word[:n])[: -len(full.heal) or None][-30:])
        heals.append(len(vocab.tokenize(full.heal.decode(), parse_special=False)))
    assert max(heals) <= HEAL_TOKENS and full.heal.decode() != " " + word


def test_typing_dense_text_the_short_prompt_is_not_read_anew_at_every_keystroke(planner, vocab):
    """A regex is more tokens a character than CHARS_PER_TOKEN: cut to fit from the left, the
    short prompt would shift by a token at each keystroke and be read from its start."""
    regex = (r"""    pattern = re.compile(r'(\:(.?[<>=\^])?(?P<sign>[-+ ])?(#)?(0)?(\d+)?(,)?(\.\d+)?"""
             r"""([bcdeEfFgGnosxX%])?')""")
    before = LONG[:2000] + "\n"
    prompts = [planner.short(request(before + regex[:i]), MIN_SHORT_TOKENS) for i in range(1, len(regex) + 1)]
    read = sum(len(b.tokens) - common_prefix(a.tokens, b.tokens) for a, b in itertools.pairwise(prompts))
    assert read <= 2 * len(regex), f"{read} tokens read over {len(regex)} keystrokes"
    assert all(len(p.tokens) <= MIN_SHORT_TOKENS * 3 // 2 for p in prompts)
    assert vocab.detokenize(prompts[-1].tokens).endswith(regex[: -len(prompts[-1].heal) or None][-20:])


def test_a_long_text_is_tokenized_once_and_each_caller_gets_its_own_list(vocab):
    """The text after the cursor is tokenized at every keystroke, for the prompt and for lookup."""
    hits = vocab._memo.cache_info().hits
    first = vocab.tokenize(LONG[:4000], parse_special=False)
    first.append(-1)
    again = vocab.tokenize(LONG[:4000], parse_special=False)
    assert again == first[:-1] and vocab._memo.cache_info().hits == hits + 1


def test_a_short_prompt_holds_less_only_on_a_model_that_reads_it_slowly():
    assert least_short(RATE) == MIN_SHORT_TOKENS
    heavy = ReadRate(base_ms=10.0, depth_ms=0.0)  # about a model 4x the embedded one, here
    assert least_short(heavy) == 30 and heavy.ms(0, 30) <= SHORT_LEAST_MS
    assert least_short(ReadRate(base_ms=40.0, depth_ms=0.0)) == LEAST_SHORT_TOKENS


def test_a_heavy_models_short_prompt_holds_what_it_reads_in_its_time(planner):
    slow = ReadRate(base_ms=10.0, depth_ms=0.0)  # the budget (150 ms) reads 15 tokens
    text = LONG + "".join(f"value_{i} = compute(value_{i - 1}, {i})\n" for i in range(1, 200))
    req = request(text, budget_ms=150)
    heavy, short = planner.choose(req, planner.full(req), 0, slow, [], least=least_short(slow))
    other = request(text, budget_ms=150, path="b.py")  # the least size as before, unless asked
    default, _ = planner.choose(other, planner.full(other), 0, slow, [])
    assert short and len(heavy.tokens) <= 30 * 3 // 2 and len(heavy.tokens) < len(default.tokens)
