"""The hindsight bounds of prompt lookup and a draft model: pure functions on token lists and
a cost table, and a draft's runs read off the real model."""

from decode_helpers import decode
from lsp_helpers import REPEATED

from bench.bound import Spot, best_ms, bounds, draft_bound, draft_runs, policy_ms, spots
from speculative.cost_model import CostModel
from speculative.drafters import PromptLookup

COSTS = CostModel({1: 10.0, 2: 12.0, 4: 16.0, 8: 24.0, 16: 40.0, 32: 72.0})  # 2 ms a row after the first


def test_runs_count_the_draft_tokens_the_target_then_produced():
    prompt = [1, 2, 3, 4, 5, 1, 2, 3]
    tokens = [4, 5, 1, 2, 9]
    # after ...1 2 3 4 the text repeats from its start: 5 1 2 3 4, of which 5 1 2 come next
    found = spots(PromptLookup(), prompt, tokens, gaps=[0.1, 3.0, 12.0])
    assert [s.run for s in found][:3] == [3, 2, 1] and found[-1].run == 0
    assert found[0].kind.endswith("/g0") and found[1].kind.endswith("/g2") and found[2].kind.endswith("/g10")
    assert spots(PromptLookup(), [1, 2, 3], [4])[0].kind == "", "no match: nothing a policy could draft"


def test_no_runs_cost_plain_steps():
    assert best_ms([0, 0, 0, 0], COSTS, 16) == 3 * COSTS.cost(1)


def test_a_long_run_is_taken_in_one_step_when_rows_are_cheap():
    # 5 tokens: one step verifying 3 drafted tokens emits the other 4 for cost(4) = 16 ms
    assert best_ms([3, 0, 0, 0, 0], COSTS, 16) == COSTS.cost(4)
    assert best_ms([3, 0, 0, 0, 0], COSTS, 1) == COSTS.cost(2) + 2 * COSTS.cost(1), "capped by max_draft"


def test_dear_rows_make_drafting_not_pay():
    dear = CostModel({1: 10.0, 2: 21.0, 4: 43.0})
    assert best_ms([3, 0, 0, 0, 0], dear, 16) == 4 * dear.cost(1)


def test_a_policy_pays_for_rejected_drafts():
    case = [Spot(0, "a"), Spot(2, "b"), Spot(0, "a"), Spot(0, "a"), Spot(0, "")]
    # k=2 at "a" verifies 3 rows (14 ms) for 1 token; at "b" it takes the run of 2 and the
    # target's next token in one step, which ends the case
    assert policy_ms(case, lambda kind: 2, COSTS, 16) == 2 * COSTS.cost(3)
    assert policy_ms(case, lambda kind: 0, COSTS, 16) == 4 * COSTS.cost(1)


def test_bounds_order_and_values():
    case = [Spot(0, "a"), Spot(2, "b"), Spot(0, "a"), Spot(0, "a"), Spot(0, "")]
    b = bounds([case], COSTS, 16)
    # draft 2 at "b" only: 10 ms, then 14 ms for the last three tokens, against 40 ms plain
    assert b["per_kind"] == 40 / 24 and b["per_position"] == 40 / 24
    mixed = [Spot(2, "a"), Spot(0, "a"), Spot(0, "a"), Spot(0, "a"), Spot(0, "a"), Spot(0, "")]
    b = bounds([mixed, mixed[1:] + [Spot(0, "")]], COSTS, 16)
    assert b["per_position"] > b["per_kind"] >= 1.0, "one length per kind cannot tell these positions apart"


def test_a_draft_step_is_paid_for_every_drafted_token():
    # the run of 3 in one step costs cost(4) and 3 draft steps; at 3 ms a draft step that
    # still beats 4 plain steps, at 10 ms it does not
    assert best_ms([3, 0, 0, 0, 0], COSTS, 16, draft_ms=3.0) == COSTS.cost(4) + 9.0
    assert best_ms([3, 0, 0, 0, 0], COSTS, 16, draft_ms=10.0) == 4 * COSTS.cost(1)
    assert draft_bound([[3, 0, 0, 0, 0]], COSTS, 16, 3.0) == 4 * COSTS.cost(1) / (COSTS.cost(4) + 9.0)


def test_a_draft_models_runs_end_where_its_choice_is_not_the_targets(engine):
    """On the repeated line every next token is certain (test_model_premises), so the model
    drafting for itself agrees everywhere but at a token put in by hand."""
    engine.reset()
    prompt = engine.tokenize(REPEATED)
    tokens = decode(engine, prompt, max_tokens=20).tokens
    wrong = next(t for t in engine.tokenize(" 7 x") if t not in tokens)
    tokens[10] = wrong
    runs = draft_runs(engine, prompt, tokens)
    assert runs[:10] == list(range(9, -1, -1)), "from j the draft agrees up to the token before the wrong one"
    assert runs[-1] == 0


def test_a_bound_where_nothing_pays_is_plain_exactly_however_the_steps_round():
    """Drafting nothing is plain: the bound is 1.0 exactly, not 0.9999999999999997 (the sum of
    many step costs rounds unlike their product; a bench test failed on that)."""
    costs = CostModel({1: 0.3, 2: 10.0})  # 48 steps of 0.3, summed, round above 48 x 0.3
    assert draft_bound([[0] * 49], costs, 16, draft_ms=0.1) == 1.0
