"""The cost model picks the draft length from measured verify costs and never drafts at a loss."""

import json
import subprocess
import sys

import pytest

from speculative.cost_model import PROFILE_KS, CostModel, ReadRate, load_cost_model

# The verify costs measured here for SmolLM2-135M on 2 cores (ms for n rows).
MEASURED = {1: 12.1, 2: 16.9, 3: 21.2, 4: 26.8, 5: 31.2, 6: 37.4, 8: 45.4, 10: 55.5, 12: 65.3, 16: 78.0,
            20: 104.8, 24: 118.9, 32: 169.0}


def test_interpolates_between_measured_sizes():
    cm = CostModel(MEASURED)
    assert cm.cost(4) == 26.8
    assert cm.cost(7) == (37.4 + 45.4) / 2
    assert cm.cost(64) == 169.0 * 2


def test_a_drift_seen_in_batched_steps_prices_every_batched_size():
    cm = CostModel(MEASURED)
    for _ in range(3):
        cm.observe(4, 2 * 26.8)  # the machine got slower at batched rows only
    assert cm.cost(8) == pytest.approx(2 * 45.4)
    assert cm.cost(1) == 12.1
    assert cm.choose([0.75] * 16) < CostModel(MEASURED).choose([0.75] * 16)


def test_one_row_drift_prices_batched_sizes_until_they_are_seen():
    cm = CostModel(MEASURED)
    for _ in range(2):
        cm.observe(1, 24.2)
    assert cm.cost(8) == 45.4  # two steps are not enough to trust
    cm.observe(1, 24.2)
    assert cm.cost(1) == pytest.approx(24.2)
    assert cm.cost(8) == pytest.approx(90.8)


def test_a_short_context_and_a_long_one_keep_their_own_drift():
    cm = CostModel(MEASURED)
    for _ in range(3):
        cm.observe(1, 2 * 12.1, depth=3000)  # attention over a long context
        cm.observe(1, 0.5 * 12.1, depth=100)
    assert cm.cost(1, depth=3000) == pytest.approx(24.2)
    assert cm.cost(1, depth=100) == pytest.approx(6.05)
    assert cm.cost(8, depth=3000) == pytest.approx(90.8)
    assert cm.cost(1) == 12.1  # the profile's own depth has seen nothing yet
    assert cm.choose([0.75] * 16, depth=3000) == cm.choose([0.75] * 16)  # drift alike: choice alike


def test_one_stall_does_not_make_drafting_look_free():
    cm = CostModel(MEASURED)
    for _ in range(3):
        cm.observe(1, 12.1)
    cm.observe(1, 100 * 12.1)
    assert cm.cost(1) <= 1.2 * 12.1 + 1e-9


def test_drafts_nothing_when_acceptance_is_low():
    cm = CostModel(MEASURED)
    assert cm.choose([0.2] * 16) == 0
    # k=1 pays only if (1 + p) / 16.9 > 1.03 / 12.1, i.e. p > 0.44
    assert cm.choose([0.4] * 16) == 0
    assert cm.choose([0.6] * 16) >= 1


def test_drafts_longer_when_acceptance_is_high_and_never_past_the_cap():
    cm = CostModel(MEASURED)
    k_mid, k_high = cm.choose([0.75] * 16), cm.choose([0.97] * 16)
    assert 1 <= k_mid < k_high
    assert cm.choose([0.97] * 3) == 3
    assert cm.choose([]) == 0


def test_chosen_length_is_the_best_expected_rate():
    cm = CostModel(MEASURED, margin=1.0)
    for p in (0.5, 0.7, 0.9, 0.99):
        k = cm.choose([p] * 31)
        rate = lambda k, p=p: sum(p ** i for i in range(k + 1)) / cm.cost(k + 1)  # noqa: E731
        assert all(rate(k) >= rate(j) for j in range(32))


def test_draft_cost_per_token_counts():
    cm = CostModel(MEASURED)
    assert cm.choose([0.9] * 8, draft_ms_per_token=0.0) > 0
    assert cm.choose([0.9] * 8, draft_ms_per_token=12.1) == 0  # a draft as slow as the target


def test_a_fixed_draft_cost_counts_once_and_can_outweigh_the_gain():
    costs = CostModel({1: 10.0, 2: 12.0, 8: 24.0})
    ps = [0.9] * 7
    k = costs.choose(ps)
    assert k > 0
    assert costs.choose(ps, draft_ms=5.0) > 0  # a small read ahead of the draft still pays
    assert costs.choose(ps, draft_ms=200.0) == 0  # a long one costs more than the draft gains
    assert costs.choose(ps, 1.0, draft_ms=5.0) >= costs.choose(ps, 1.0)  # spread over a longer draft


def test_profile_is_cached_per_model_file_and_threads(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))
    first = load_cost_model(engine, 2, "b")
    assert set(first.verify_ms) == set(PROFILE_KS)
    assert all(v > 0 for v in first.verify_ms.values())
    assert first.verify_ms[32] > first.verify_ms[1]
    assert first.read.base_ms > 0 and first.read.depth_ms >= 0  # the prompt read rate, measured with them
    table = json.loads((tmp_path / "verify_costs.json").read_text())
    (key,) = table
    table[key]["verify_ms"]["1"] = 999.0  # prove the second load reads the file
    table[key]["read_ms"] = [7.0, 0.001]
    (tmp_path / "verify_costs.json").write_text(json.dumps(table))
    again = load_cost_model(engine, 2, "b")
    assert again.verify_ms[1] == 999.0 and (again.read.base_ms, again.read.depth_ms) == (7.0, 0.001)
    # another thread count is another entry
    (tmp_path / "verify_costs.json").write_text("not json")  # a corrupt cache is re-profiled
    assert load_cost_model(engine, 1, "b").verify_ms[1] != 999.0


def test_a_copy_of_a_model_file_elsewhere_keeps_its_profile_and_another_file_does_not(tmp_path):
    """The cache key is the file's content (size, first and last MiB), not its path: a model
    pulled again under another name, or moved, is not profiled anew."""
    from speculative.cost_model import _cache_key

    data = bytes(range(256)) * 20_000
    (tmp_path / "a").mkdir()
    for name, content in (("a/model.gguf", data), ("copy.gguf", data), ("other.gguf", data[:-1] + b"x")):
        (tmp_path / name).write_bytes(content)
    key = _cache_key(tmp_path / "a" / "model.gguf", 2, "b")
    assert _cache_key(tmp_path / "copy.gguf", 2, "b") == key
    assert _cache_key(tmp_path / "other.gguf", 2, "b") != key
    assert _cache_key(tmp_path / "copy.gguf", 1, "b") != key


def test_check_measures_the_verify_costs_once_and_the_server_starts_with_them(tmp_path, monkeypatch):
    """The install runs `specfill check --costs`, so the first start does not measure them
    (3 s before the first suggestion). Shipped weights: no conversion into the empty cache."""
    from lsp_server.backends.worker import ModelWorker
    from lsp_server.settings import Settings

    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))

    def check(*flags: str) -> dict:
        run = subprocess.run([sys.executable, "-m", "lsp_server", "check", "--json", "--weights", "shipped", *flags],
                             capture_output=True, text=True, timeout=300, check=True)
        return json.loads(run.stdout)

    assert "verify_costs" not in check() and not (tmp_path / "verify_costs.json").exists()  # a health check stays light
    assert check("--costs")["verify_costs"] == "measured"
    assert check("--costs")["verify_costs"] == "cached"
    s = Settings()
    s.model.weights = "shipped"
    w = ModelWorker()
    try:
        w.load(s).result()
        assert w.local is not None and not w.local.costs.measured, "the server read the table check left"
    finally:
        w.shutdown()


def test_the_read_rate_prices_a_prompt_by_its_length_and_depth():
    rate = ReadRate(base_ms=1.0, depth_ms=0.001)
    assert rate.ms(0, 100) == pytest.approx(100 * (1.0 + 0.05))  # each token at its own depth
    assert rate.ms(1000, 100) > rate.ms(0, 100)  # attention over what is already read
    for start in (0, 500, 2000):
        n = rate.tokens_within(300, start)
        assert rate.ms(start, n) <= 300 < rate.ms(start, n + 1)
    assert ReadRate(2.0, 0.0).tokens_within(300) == 150


def test_real_reads_move_the_read_rate_and_one_stall_does_not_run_away():
    rate = ReadRate(base_ms=1.0, depth_ms=0.0)
    rate.observe(32, 0, 64.0)  # the machine reads at half the profiled speed
    assert rate.ms(0, 100) == pytest.approx(200.0)
    rate.observe(32, 0, 64_000.0)  # a stall of the whole machine
    assert rate.scale <= 0.8 * 2.0 + 0.2 * 3 * 2.0


def test_more_rows_never_cost_less_than_fewer():
    noisy = {**MEASURED, 1: 18.0}  # a one-row step profiled during a stall
    cm = CostModel(noisy)
    assert cm.cost(1) == cm.cost(2) == 18.0 and cm.cost(3) == 21.2
    assert all(cm.cost(n + 1) >= cm.cost(n) for n in range(1, 32))


def test_a_slowed_one_row_step_never_prices_a_batch_below_it():
    cm = CostModel(MEASURED)
    for _ in range(3):
        cm.observe(1, 3 * 12.1)  # one-row steps slowed by load
        cm.observe(2, 16.9)  # two-row ones not
    assert cm.cost(1) > 1.5 * 12.1 and cm.cost(2) >= cm.cost(1)
    # A self-draft (a token costs a step) never wins against the steps it would replace.
    assert cm.choose([1.0] * 16, draft_ms_per_token=cm.cost(1)) == 0
