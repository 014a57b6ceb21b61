"""The hindsight bound of prompt lookup: pure functions on token lists and a cost table."""

from speculative.bound import accepted_runs, best_ms, lookup_bound
from speculative.cost_model import CostModel
from speculative.drafters import PromptLookup

COSTS = CostModel({1: 10.0, 2: 12.0, 4: 16.0, 8: 24.0, 16: 40.0, 32: 72.0})  # 2 ms a row after the first


def test_runs_count_the_draft_tokens_the_target_then_produced():
    prompt = [1, 2, 3, 4, 5, 1, 2, 3]
    tokens = [4, 5, 1, 2, 9]
    # after ...1 2 3 4 the text repeats from its start: 5 1 2 3 4, of which 5 1 2 come next
    assert accepted_runs(PromptLookup(), prompt, tokens)[:3] == [3, 2, 1]
    assert accepted_runs(PromptLookup(), prompt, tokens)[-1] == 0, "nothing after the last token"


def test_no_runs_cost_plain_steps():
    assert best_ms([0, 0, 0, 0], COSTS, 16) == 3 * COSTS.cost(1)


def test_a_long_run_is_taken_in_one_step_when_rows_are_cheap():
    # 5 tokens: one step verifying 3 drafted tokens emits the other 4 for cost(4) = 16 ms
    assert best_ms([3, 0, 0, 0, 0], COSTS, 16) == COSTS.cost(4)
    assert best_ms([3, 0, 0, 0, 0], COSTS, 1) == COSTS.cost(2) + 2 * COSTS.cost(1), "capped by max_draft"


def test_dear_rows_make_drafting_not_pay():
    dear = CostModel({1: 10.0, 2: 21.0, 4: 43.0})
    assert best_ms([3, 0, 0, 0, 0], dear, 16) == 4 * dear.cost(1)


def test_bound_over_cases_is_plain_time_over_oracle_time():
    prompt = [7, 8, 9, 10, 11, 12] * 3
    tokens = [7, 8, 9, 10, 11, 12, 7, 8]
    bound = lookup_bound([(prompt, tokens, [])], COSTS, 16)
    assert bound > 2.0, "a text that repeats exactly is nearly free to verify"
    assert lookup_bound([([1, 2, 3], [4, 5, 6], [])], COSTS, 16) == 1.0, "nothing to copy"
