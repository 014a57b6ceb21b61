"""`specfill bench`: every decoding mode on every workload case, side by side, in one process.

Modes: plain (greedy, one token a step), lookup (prompt lookup), draft (a draft model), auto
(lookup, then the draft model), anchor (llama-cpp-python's LlamaPromptLookupDecoding).
Every mode of a case starts from the same warm KV cache, so TTFT compares like with like;
anchor has its own context and runs after the others (its logits buffer would otherwise
count in their peak RSS). `speedup` is decode tok/s over plain's in the same run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.bound import bounds, draft_bound, draft_runs, spots
from bench.divergence import divergence, explained
from bench.machine import cpu_flags
from bench.memory import peak_rss_mb, reset_peak
from bench.workload import load_workload
from lsp_server.session.stats import pct
from prompts import PromptError, build_prompt, family_for, prompt_tokens
from speculative.build_info import build_info
from speculative.convert import weights_path
from speculative.cost_model import CostModel, load_cost_model
from speculative.decode import Aids, Decoding, TokenTrace, generate
from speculative.drafters import Auto, DraftModel, PromptLookup
from speculative.engine import Engine

MODES = ("plain", "anchor", "lookup", "draft", "auto")


@dataclass
class ModeStats:
    texts: list[str] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    decode_tokens: int = 0
    decode_ms: float = 0.0
    drafted: int = 0
    accepted: int = 0
    spec_steps: int = 0
    replayed: int = 0  # tokens read off rows a run before kept: must stay 0 in a comparison of modes
    peak_rss: float = 0.0

    def add(self, text: str, tokens: list[int], ttft: float, total: float) -> None:
        self.texts.append(text)
        self.tokens.append(tokens)
        self.ttft.append(ttft)
        self.latency.append(total)
        self.decode_tokens += max(0, len(tokens) - 1)
        self.decode_ms += total - ttft
        self.peak_rss = max(self.peak_rss, peak_rss_mb())


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    filled = width * done // max(1, total)
    bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<24}"
    if sys.stderr.isatty():
        sys.stderr.write("\r" + bar)
    elif done % 10 == 0 or done == total:  # a log file gets a line now and then, not a flood
        sys.stderr.write(bar.rstrip() + "\n")
    sys.stderr.flush()


def run(workload: str, model: str | None, draft_model: str | None, modes: list[str], max_tokens: int,
        prompt_budget: int, n_ctx: int, threads: int, max_draft: int = 16, weights: str = "auto") -> dict:
    cases = load_workload(workload)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    if "plain" not in modes:
        modes = ["plain", *modes]  # the baseline of speedup and identical
    from bench.regime import resolve  # gguf-py, a test extra: only when a bench runs

    path = weights_path(resolve(model), weights)  # what the server loads
    engine = Engine(path, n_ctx=n_ctx, n_threads=threads)
    build = build_info()
    costs = load_cost_model(engine, threads, build["build"])
    family = family_for(engine)
    drafter_model = None
    if "draft" in modes or (draft_model and "auto" in modes):
        dpath = weights_path(resolve(draft_model), weights) if draft_model else path
        dengine = Engine(dpath, n_ctx=n_ctx, n_threads=threads)
        drafter_model = DraftModel(dengine, engine, load_cost_model(dengine, threads, build["build"]))
    drafters = {"plain": None, "lookup": PromptLookup(), "draft": drafter_model,
                "auto": Auto(PromptLookup(), drafter_model if draft_model else None)}
    ours = [m for m in modes if m != "anchor"]
    stats = {m: ModeStats() for m in modes}
    gaps: dict[int, list[float]] = {}  # case -> plain's top-2 logit gap per token, where needed
    prompts: list[tuple[list[int], tuple[str, ...]]] = []
    extras: list[list[list[int]]] = []
    total_runs = len(cases) * len(modes)
    skipped: list[str] = []
    done = 0
    for case in cases:
        parts = build_prompt(family, case["prefix"], case["suffix"], case["path"])
        try:
            ids = prompt_tokens(engine, parts, prompt_budget)
        except PromptError as exc:  # e.g. an empty file for a model without BOS: nothing to go on
            skipped.append(f"{case['id']}: {exc}")
            total_runs -= len(modes)
            continue
        extra = [engine.tokenize(case["suffix"][:4000], parse_special=False)]
        prompts.append((ids, parts.stop))
        extras.append(extra)
        engine.prefill(ids)  # untimed: every mode starts from the same warm cache
        if drafter_model is not None:  # the draft's too, as the server's read ahead leaves it
            drafter_model.engine.prefill(ids)
        # Rotate which mode goes first: with plain always first, a mode that drafted nothing
        # measured 1.01-1.05x of plain, so the first run after a prefill is a little slower.
        turn = len(prompts) % len(ours)
        for mode in ours[turn:] + ours[:turn]:
            # Each mode from the same state: the prompt held, no generated rows kept after it
            # (the next generation from a prompt replays them: every mode after a case's first
            # one would read the tokens the mode before decoded for free).
            engine.truncate(len(ids))
            if drafter_model is not None:
                drafter_model.engine.truncate(len(ids))
            reset_peak()
            r = generate(engine, ids, Decoding(max_tokens=max_tokens, stop=parts.stop, max_draft=max_draft),
                         Aids(drafter=drafters[mode], costs=costs, extra_sources=extra))
            s = stats[mode]
            s.add(r.text, r.tokens, r.ttft_ms, r.total_ms)
            s.drafted += r.drafted
            s.accepted += r.accepted
            s.spec_steps += r.spec_steps
            s.replayed += r.replayed
            done += 1
            _progress(done, total_runs, f"{case['id']} {mode}")
    if "anchor" in modes:
        anchor_engine = None
        try:
            from bench.anchor import Anchor

            reset_peak()
            anchor_engine = Anchor(path, n_ctx, threads)
            for ids, stop in prompts:
                if len(ids) > 1:
                    anchor_engine.warm(ids[:-1])  # as warm as ours: the last prompt token is evaluated
                text, ttft, total, _ = anchor_engine.generate(ids, max_tokens, stop)
                stats["anchor"].add(text, engine.tokenize(text, parse_special=False), ttft, total)
                done += 1
                _progress(done, total_runs, "anchor")
        finally:
            if anchor_engine is not None:
                anchor_engine.close()
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    plain = stats["plain"]
    # Replay plain with a trace (untimed: it costs ~0.3 ms a token): the top-2 logit gaps say
    # whether a mode's first difference from plain was a near-tie, and feed the lookup bounds.
    bound_lookup = PromptLookup()
    case_spots, case_runs = [], []
    for i, (ids, stop) in enumerate(prompts):
        r = generate(engine, ids, Decoding(max_tokens=max_tokens, stop=stop), Aids(tracer=TokenTrace()))
        gaps[i] = [t["gap"] for t in r.trace]
        bound_lookup.begin(extras[i])
        case_spots.append(spots(bound_lookup, ids, plain.tokens[i], gaps[i]))
        bound_lookup.end(plain.tokens[i])
        if drafter_model is not None:
            case_runs.append(draft_runs(drafter_model.engine, ids, plain.tokens[i]))
    # The costs as this run's real steps found them, at its typical depth (prompt and half a suggestion).
    depth = int(statistics.median(len(ids) for ids, _ in prompts)) + max_tokens // 2 if prompts else None
    run_costs = CostModel({n: costs.cost(n, depth) for n in costs.verify_ms})
    plain_rate = plain.decode_tokens / plain.decode_ms * 1000 if plain.decode_ms else 0.0
    report_modes = {}
    for mode in modes:
        s = stats[mode]
        rate = s.decode_tokens / s.decode_ms * 1000 if s.decode_ms else 0.0
        identical = sum(a == b for a, b in zip(s.texts, plain.texts, strict=True)) / max(1, len(prompts))
        unexplained = sum(not explained(divergence(plain.tokens[i], gaps.get(i, []), toks))
                          for i, (text, toks) in enumerate(zip(s.texts, s.tokens, strict=True))
                          if text != plain.texts[i])
        report_modes[mode] = {
            "speedup": rate / plain_rate if plain_rate else 0.0,
            "decode_tok_s": rate,
            "accepted_per_step": s.accepted / s.spec_steps if s.spec_steps else 0.0,
            "acceptance_rate": s.accepted / s.drafted if s.drafted else 0.0,
            "drafted": s.drafted,
            "replayed": s.replayed,
            "identical": identical,
            "divergences_unexplained": unexplained,
            "ttft_ms": {"p50": pct(s.ttft, 0.5), "p95": pct(s.ttft, 0.95)},
            "latency_ms": {"p50": pct(s.latency, 0.5), "p95": pct(s.latency, 0.95), "p99": pct(s.latency, 0.99)},
            "peak_rss_mb": s.peak_rss,
        }
    report = {
        "model": path.name, "draft_model": (Path(draft_model).name if draft_model else
                                            (path.name if drafter_model else None)),
        "workload": workload, "n_cases": len(prompts), "skipped": skipped, "family": family, "build": build,
        "threads": threads, "max_tokens": max_tokens, "prompt_tokens": prompt_budget, "max_draft": max_draft,
        "verify_ms": {str(k): round(v, 2) for k, v in costs.verify_ms.items()},
        "extra_buffers": list(engine.buffer_types), "cpu_flags": cpu_flags(),
        "model_file_mb": path.stat().st_size / 2**20,
        "modes": report_modes,
        "draft_ms_per_token": drafter_model.ms_per_token if drafter_model else None,
        # What a verified row past the first cost, in plain steps: as profiled, and as this
        # run's real steps priced it (the yardstick: speculation must pay below 0.4).
        "row_cost_steps": {"profile": row_costs(CostModel(costs.verify_ms)), "this_run": row_costs(run_costs)},
        # Modelled speedups of prompt lookup with draft lengths chosen in hindsight, at this run's costs.
        "lookup_bound": bounds(case_spots, run_costs, max_draft),
        # The same for the draft model, at the draft step this run measured.
        "draft_bound": (draft_bound(case_runs, run_costs, max_draft, drafter_model.ms_per_token)
                        if drafter_model is not None else None),
    }
    engine.close()
    if drafter_model is not None:
        drafter_model.engine.close()
    return report


def row_costs(costs: CostModel) -> dict[str, float]:
    """Cost of each verified row past the first, as a share of a one-row step, at 4 and 16 rows."""
    return {str(n): (costs.cost(n) - costs.cost(1)) / (n - 1) / costs.cost(1) for n in (4, 16)}


def print_table(report: dict) -> None:
    b = report["build"]
    print(f"model {report['model']} ({report['family']}, extra buffers {'+'.join(report['extra_buffers']) or 'none'}), "
          f"{report['n_cases']} cases from {report['workload']}, "
          f"build {b['build']} (batch-invariant: {b['batch_invariant']}), {report['threads']} threads, "
          f"CPU flags {report['cpu_flags']}")
    head = (f"{'mode':<8}{'speedup':>8}{'tok/s':>8}{'acc/step':>9}{'acc rate':>9}{'ident.':>7}{'unexpl.':>8}"
            f"{'ttft p50':>9}{'p95':>6}{'lat p50':>8}{'p95':>6}{'p99':>6}{'rss MB':>8}")
    print(head)
    for mode, m in report["modes"].items():
        print(f"{mode:<8}{m['speedup']:>7.2f}x{m['decode_tok_s']:>8.1f}{m['accepted_per_step']:>9.2f}"
              f"{m['acceptance_rate']:>9.2f}{m['identical']:>7.2f}{m['divergences_unexplained']:>8d}"
              f"{m['ttft_ms']['p50']:>9.0f}{m['ttft_ms']['p95']:>6.0f}{m['latency_ms']['p50']:>8.0f}"
              f"{m['latency_ms']['p95']:>6.0f}{m['latency_ms']['p99']:>6.0f}{m['peak_rss_mb']:>8.0f}")
    bound = report["lookup_bound"]
    print(f"lookup's draft lengths chosen in hindsight (modelled from the verify costs): per position "
          f"{bound['per_position']:.2f}x, one per kind of match {bound['per_kind']:.2f}x")
    if report["draft_bound"] is not None:
        print(f"the draft model's draft lengths chosen in hindsight (its step {report['draft_ms_per_token']:.1f} ms): "
              f"{report['draft_bound']:.2f}x")
    rows = report["row_cost_steps"]
    print("a verified row past the first, in plain steps (4 / 16 rows): profiled "
          + " / ".join(f"{v:.2f}" for v in rows["profile"].values()) + ", this run "
          + " / ".join(f"{v:.2f}" for v in rows["this_run"].values()))


def main(workload: str, model: str | None, draft_model: str | None, modes: str, max_tokens: int,
         prompt_budget: int, n_ctx: int, threads: int, json_out: str | None, max_draft: int = 16,
         weights: str = "auto") -> int:
    t0 = time.perf_counter()
    threads = threads or os.cpu_count() or 1
    report = run(workload, model, draft_model, [m.strip() for m in modes.split(",") if m.strip()],
                 max_tokens, prompt_budget, n_ctx, threads, max_draft, weights)
    report["wall_s"] = time.perf_counter() - t0
    print_table(report)
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2))
    return 0
