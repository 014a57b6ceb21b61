"""Candidates: branches from the next-best first tokens, decoded side by side on llama.cpp
sequences that share the prompt's KV cache."""

from decode_helpers import decode
from same_output import assert_same_greedy, assert_same_greedy_text

from speculative.candidates import branch

CODE = "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n    return "


def test_branches_start_differently_and_equal_cold_greedy_runs(engine):
    prompt = engine.tokenize(CODE)
    main = decode(engine, prompt, max_tokens=10)
    steps = engine.decode_steps
    alts = branch(engine, prompt, 3, 10, exclude=[main.tokens[0]])
    side_by_side_steps = engine.decode_steps - steps
    assert len(alts) == 3
    firsts = [f for f, _ in alts]
    assert len(set(firsts)) == 3 and main.tokens[0] not in firsts
    assert len({text for _, text in alts}) == 3
    # One batched decode per token for all branches (+1 to re-read the prompt's last token),
    # not one per branch per token.
    assert side_by_side_steps <= 10 + 1
    # Branches batched side by side round like cold single runs only up to near-ties (a Xeon
    # parted `return total` into `\n```` and ` / len(`): the one cross-path rule.
    for first, text in alts:
        cold = decode(engine, prompt + [first], max_tokens=9, trace=True)
        head = engine.token_bytes(first)
        assert text.encode().startswith(head)
        assert_same_greedy_text(cold, engine.token_bytes, text.encode()[len(head):], f"branch {first}")


def test_branches_leave_the_prompt_cache_intact(engine):
    prompt = engine.tokenize(CODE)
    before = decode(engine, prompt, max_tokens=8, trace=True)
    branch(engine, prompt, 4, 8)
    again = decode(engine, prompt, max_tokens=8)
    assert_same_greedy(before, again.tokens, "after the branches")
    assert again.n_reused >= len(prompt) - 1  # the prompt stayed cached through the branches


def test_stop_strings_end_each_branch(engine):
    alts = branch(engine, engine.tokenize(CODE), 3, 40, stop=["\n"])
    assert all("\n" not in text for _, text in alts)
