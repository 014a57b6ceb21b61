"""`specfill bench-ttft`: cold prefill vs warm TTFT after appending one character."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from lsp_server.session.stats import pct
from speculative.build_info import build_info
from speculative.convert import weights_path
from speculative.decode import Decoding, generate
from speculative.engine import Engine
from speculative.model_file import resolve_model_path


def run(model: str | None, source: Path, n_tokens: int, repeat: int) -> dict:
    engine = Engine(weights_path(resolve_model_path(model)), n_ctx=4096)  # the weights the server loads
    ids = engine.tokenize(source.read_text())
    if len(ids) < n_tokens:
        raise SystemExit(f"{source} has only {len(ids)} tokens; need {n_tokens}")
    text = engine.detokenize(ids[:n_tokens])
    cold, warm, reeval = [], [], []
    for i in range(repeat):
        engine.reset()
        t0 = time.perf_counter()
        generate(engine, engine.tokenize(text), Decoding(max_tokens=1))
        cold.append((time.perf_counter() - t0) * 1000)
        typed = text
        for ch in "x = 1"[: 1 + i % 5]:  # one keystroke at a time, as a user types
            typed += ch
            t0 = time.perf_counter()
            result = generate(engine, engine.tokenize(typed), Decoding(max_tokens=1))
            warm.append((time.perf_counter() - t0) * 1000)
            reeval.append(result.n_prompt - result.n_reused)
    engine.close()
    return {
        "model": engine.path.name, "prompt_tokens": n_tokens, "build": build_info(),
        "cold_ms": {"p50": statistics.median(cold), "min": min(cold)},
        "warm_ttft_ms": {"p50": statistics.median(warm), "p95": pct(warm, 0.95), "max": max(warm)},
        "warm_tokens_evaluated": {"mean": statistics.mean(reeval), "max": max(reeval)},
        "n_warm": len(warm),
    }


def main(model: str | None, source: str, n_tokens: int, repeat: int, json_out: str | None) -> int:
    report = run(model, Path(source), n_tokens, repeat)
    print(f"model {report['model']}, {n_tokens}-token prompt, build {report['build']['build']}")
    print(f"cold TTFT  p50 {report['cold_ms']['p50']:.0f} ms")
    w = report["warm_ttft_ms"]
    print(f"warm TTFT  p50 {w['p50']:.1f} ms, p95 {w['p95']:.1f} ms, max {w['max']:.1f} ms "
          f"over {report['n_warm']} keystrokes; tokens re-evaluated: mean "
          f"{report['warm_tokens_evaluated']['mean']:.1f}, max {report['warm_tokens_evaluated']['max']}")
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2))
    return 0
