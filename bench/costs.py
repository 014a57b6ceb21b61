"""`specfill bench-costs`: what reading, a step and a verify cost, model by model, side by side.

Made to check that a `twin:N` stands in for a real model of the same weight bytes (a
`shape:` name: random weights in the real architecture): for each model, prompt tokens/s
reading 128 tokens after 128 and after 1,024 tokens of context (in the server's chunks), a
one-token step, and 2/4/8/16-row verifies at both depths, then every model's figures over the
first one's. The models are loaded together and each run measures them in turn, so a
machine that slows down for a while (these VMs move by 10-25% within minutes) slows all of
them alike; each figure is the median of its runs.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial

from bench.engine_configs import code_tokens
from bench.machine import cpu_flags
from bench.regime import resolve
from lsp_server.backends.prompt_plan import READ_CHUNK  # as the server reads a prompt in the background
from speculative.build_info import build_info
from speculative.convert import weights_path
from speculative.engine import Engine
from speculative.seqs import FULL

DEPTHS = (128, 1024)
READ_TOKENS = 128
VERIFY_ROWS = (2, 4, 8, 16)


def _figures(engine: Engine, toks: list[int]) -> dict[str, tuple[int, Callable[[], object]]]:
    """Each figure's depth and its timed work, from that many tokens held (the caller cuts back to it)."""
    work: dict[str, tuple[int, Callable[[], object]]] = {}
    for d in DEPTHS:
        work[f"read_tok_s@{d}"] = d, partial(engine.eval, toks[d:d + READ_TOKENS], chunk=READ_CHUNK)
        work[f"step_ms@{d}"] = d, partial(engine.eval, toks[d:d + 1], want_rows=[0])
        for k in VERIFY_ROWS:
            work[f"verify{k}_ms@{d}"] = d, partial(engine.eval, toks[d:d + k], want_rows=range(k))
    return work


def measure(names: Sequence[str], threads: int | None, runs: int) -> list[dict]:
    """Every model's figures, loaded as the server loads them (then closed)."""
    engines: list[Engine] = []
    try:
        for name in names:
            engines.append(Engine(weights_path(resolve(name), "auto"), n_ctx=4096, n_threads=threads))
        need = max(DEPTHS) + READ_TOKENS + max(VERIFY_ROWS)
        toks = [code_tokens(e, need) for e in engines]
        for e, t in zip(engines, toks, strict=True):
            e.eval(t[:max(DEPTHS)])  # the context every figure cuts back to
        works = [_figures(e, t) for e, t in zip(engines, toks, strict=True)]
        ms: list[dict[str, list[float]]] = [{f: [] for f in works[0]} for _ in engines]
        for figure in works[0]:
            for _ in range(runs):
                for e, t, work, times in zip(engines, toks, works, ms, strict=True):
                    depth, timed = work[figure]
                    e.truncate(depth)
                    if (held := len(e.held(FULL))) < depth:  # back from a shallower figure: read up again
                        e.eval(t[held:depth])
                    t0 = time.perf_counter()
                    timed()
                    times[figure].append((time.perf_counter() - t0) * 1000)
        rows = []
        for name, e, times in zip(names, engines, ms, strict=True):
            row: dict = {"model": name, "file": e.path.name, "mib": e.path.stat().st_size / 2**20}
            for figure, runs_ms in times.items():
                median = statistics.median(runs_ms)
                row[figure] = 1000 * READ_TOKENS / median if figure.startswith("read") else median
            rows.append(row)
        return rows
    finally:
        for e in engines:
            e.close()


def table(rows: Sequence[dict]) -> str:
    """Each figure's row: every model's value, then its ratio to the first model's."""
    names = [r["model"] for r in rows]
    head = "| figure | " + " | ".join(names) + " | " + " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |"
    lines = [head, "|" + " --- |" * (2 * len(rows))]
    for key in rows[0]:
        if key in ("model", "file"):
            continue
        values = [r[key] for r in rows]
        ratios = [f"{v / values[0]:.2f}" if values[0] else "-" for v in values[1:]]
        lines.append(f"| {key} | " + " | ".join(f"{v:.1f}" for v in values) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main(names: Sequence[str], threads: int, runs: int, json_out: str | None) -> int:
    print(f"cpu: {cpu_flags()}; llama.cpp build {build_info()['build']}; threads {threads or 'all'}; "
          f"{runs} runs of each figure, the models in turn")
    rows = measure(names, threads or None, runs)
    for r in rows:
        print(f"{r['model']}: {r['file']} ({r['mib']:.0f} MiB)")
    print(table(rows))
    if json_out:
        with open(json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0
