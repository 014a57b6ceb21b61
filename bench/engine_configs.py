"""`specfill bench-engine`: what the kernels give, per engine configuration, on this machine.

Per configuration (weights as shipped or converted to Q4_0, CPU repack buffers on or off,
n_ubatch, and the llama.cpp build: llamafile sgemm off or on), in a process of its own:
prompt tok/s (1,024 tokens of code, cold), decode tok/s, verify ms for 1/2/4/8/16 rows,
peak RSS, whether batched and one-row evaluation agree exactly, and next-token accuracy on
real code (a quality proxy). The rule the default follows is printed with the figures:
the fastest configuration that keeps exact batch invariance, if it is within 15% of the
fastest of all; else the fastest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

VERIFY_ROWS = (1, 2, 4, 8, 16)
DEFAULT_CONFIGS = [
    {"weights": "shipped", "repack": False, "ubatch": 32},
    {"weights": "shipped", "repack": True, "ubatch": 32},
    {"weights": "q4_0", "repack": False, "ubatch": 32},
    {"weights": "q4_0", "repack": True, "ubatch": 32},
    {"weights": "q4_0", "repack": True, "ubatch": 128},
    {"weights": "q4_0", "repack": True, "ubatch": 512},
]
STOCK = [{"weights": "shipped", "repack": False, "ubatch": 32}, {"weights": "q4_0", "repack": False, "ubatch": 32},
         {"weights": "q4_0", "repack": True, "ubatch": 32}]


def code_tokens(engine, n: int) -> list[int]:
    """n tokens of real code: standard-library modules, whole."""
    import argparse as a
    import inspect as i
    import textwrap as t

    text = "".join(Path(str(m.__file__)).read_text() for m in (a, i, t))
    return engine.tokenize(text)[:n]


def measure(model: str, weights: str, repack: bool, ubatch: int, threads: int) -> dict:
    """One configuration, in this process (run it in a fresh one: buffer types and peak RSS)."""
    import numpy as np

    from bench.memory import peak_rss_mb
    from speculative.build_info import build_info
    from speculative.convert import weights_path
    from speculative.engine import Engine
    from speculative.model_file import resolve_model_path

    path = weights_path(resolve_model_path(model), "q4_0" if weights == "q4_0" else "shipped")
    engine = Engine(path, n_ctx=4096, n_threads=threads or None, n_batch=max(128, ubatch), n_ubatch=ubatch,
                    repack=repack)
    toks = code_tokens(engine, 4096)
    prompt = toks[:1024]
    times = []
    for _ in range(3):
        engine.reset()
        t0 = time.perf_counter()
        engine.eval(prompt, want_rows=[len(prompt) - 1])
        times.append(time.perf_counter() - t0)
    prompt_tok_s = len(prompt) / statistics.median(times)
    engine.truncate(600)
    t0 = time.perf_counter()
    for tok in toks[600:664]:
        engine.eval([tok], want_rows=[0])
    decode_tok_s = 64 / (time.perf_counter() - t0)
    verify = {}
    for k in VERIFY_ROWS:
        runs = []
        for _ in range(7):
            engine.truncate(600)
            t0 = time.perf_counter()
            engine.eval(toks[600:600 + k], want_rows=range(k))
            runs.append((time.perf_counter() - t0) * 1000)
        verify[k] = statistics.median(runs)
    invariant, max_diff = True, 0.0
    for at in (300, 600, 900):  # 16 rows in one batch against the same tokens one at a time, same context
        engine.reset()
        engine.eval(toks[:at])
        batched = engine.eval(toks[at:at + 16], want_rows=range(16))
        engine.reset()
        engine.eval(toks[:at])
        single = [engine.eval([t], want_rows=[0])[0] for t in toks[at:at + 16]]
        diff = max(float(np.abs(a - b).max()) for a, b in zip(batched, single, strict=True))
        invariant &= diff == 0.0
        max_diff = max(max_diff, diff)
    engine.reset()
    right = total = 0
    for start in range(0, 2048, 128):  # next-token accuracy on code the model reads
        rows = engine.eval(toks[start:start + 128], want_rows=range(128))
        for j, row in enumerate(rows):
            if start + j + 1 < len(toks):
                right += int(np.argmax(row)) == toks[start + j + 1]
                total += 1
    info = build_info()
    return {"weights": weights, "file": path.name, "file_mb": path.stat().st_size / 2**20, "repack": repack,
            "buffers": list(engine.buffer_types), "ubatch": ubatch, "build": info["build"],
            "prompt_tok_s": prompt_tok_s, "decode_tok_s": decode_tok_s,
            "verify_ms": {str(k): v for k, v in verify.items()}, "rss_mb": peak_rss_mb(),
            "batch_invariant": invariant, "max_diff": max_diff, "next_token_accuracy": right / total}


def _stock_path(wheels: Path) -> str | None:
    """The llamafile-on llama-cpp-python wheel unpacked, for PYTHONPATH (None if not built)."""
    found = sorted(wheels.glob("llama_cpp_python-*.whl"))
    if not found:
        return None
    target = Path(tempfile.mkdtemp(prefix="specfill-stock-"))
    with zipfile.ZipFile(found[-1]) as z:
        z.extractall(target)
    return str(target)


def _run(config: dict, model: str, threads: int, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, str(Path(__file__).resolve().parents[1])])
    out = subprocess.run([sys.executable, "-m", "bench.engine_configs", "--one", json.dumps(config),
                          "--model", model, "--threads", str(threads)], capture_output=True, text=True, env=env,
                         check=False, timeout=600)
    if out.returncode != 0:
        return {**config, "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def choose(rows: list[dict]) -> tuple[dict, str]:
    """The rule: the fastest batch-invariant configuration if within 15% of the fastest."""
    ok = [r for r in rows if "error" not in r]
    fastest = max(ok, key=lambda r: r["prompt_tok_s"])
    invariant = [r for r in ok if r["batch_invariant"]]
    if invariant:
        best = max(invariant, key=lambda r: r["prompt_tok_s"])
        if best["prompt_tok_s"] >= 0.85 * fastest["prompt_tok_s"]:
            return best, "fastest batch-invariant configuration, within 15% of the fastest"
    return fastest, "fastest; not batch-invariant, so speculation's divergences must stay near-ties"


def median_row(runs: list[dict]) -> dict:
    """One configuration's repeated runs: medians of the speeds, the worst RSS, invariant only if always."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    row = dict(ok[0])
    for key in ("prompt_tok_s", "decode_tok_s"):
        row[key] = statistics.median(r[key] for r in ok)
    row["verify_ms"] = {k: statistics.median(r["verify_ms"][k] for r in ok) for k in ok[0]["verify_ms"]}
    row["rss_mb"] = max(r["rss_mb"] for r in ok)
    row["batch_invariant"] = all(r["batch_invariant"] for r in ok)
    row["max_diff"] = max(r["max_diff"] for r in ok)
    row["runs"] = len(ok)
    return row


def main(model: str, threads: int, stock_wheels: str, json_out: str | None, every: bool, repeat: int = 3) -> int:
    from bench.machine import cpu_flags

    threads = threads or os.cpu_count() or 1
    configs = [dict(c, build="llamafile-off") for c in DEFAULT_CONFIGS]
    stock = _stock_path(Path(stock_wheels))
    if stock:
        configs += [dict(c, build="llamafile-on") for c in STOCK]
    if every:
        configs = [{"weights": w, "repack": r, "ubatch": u, "build": b} for b in ("llamafile-off", "llamafile-on")
                   if b == "llamafile-off" or stock for w in ("shipped", "q4_0") for r in (False, True)
                   for u in (32, 128, 512)]
    print(f"{model or 'the default model'}, {threads} threads, {os.cpu_count()} cores; CPU flags: {cpu_flags()}; "
          f"medians of {repeat} runs a configuration, interleaved (this machine's run-to-run noise is ~20%)")
    if not stock:
        print(f"(no llamafile-on build in {stock_wheels}: build one to compare, see docs/performance.md)")
    head = (f"{'weights':<8}{'repack':>7}{'ubatch':>7}{'build':>14}{'MiB':>5}{'prompt':>8}{'decode':>8}"
            + "".join(f"{'v' + str(k):>6}" for k in VERIFY_ROWS) + f"{'RSS':>6}{'invariant':>10}{'acc':>6}")
    print(head)
    runs: list[list[dict]] = [[] for _ in configs]
    for _ in range(repeat):
        for i, config in enumerate(configs):
            build = config["build"]
            one = _run({k: v for k, v in config.items() if k != "build"}, model, threads,
                       stock if build == "llamafile-on" else None)
            one["build"] = one.get("build", build)
            runs[i].append(one)
    rows = []
    for config, config_runs in zip(configs, runs, strict=True):
        build = config["build"]
        row = median_row(config_runs)
        rows.append(row)
        if "error" in row:
            print(f"{row['weights']:<8}{row['repack']!s:>7}{row['ubatch']:>7}{build:>14}  failed: {row['error']}")
            continue
        print(f"{row['weights']:<8}{row['repack']!s:>7}{row['ubatch']:>7}{row['build']:>14}{row['file_mb']:>5.0f}"
              f"{row['prompt_tok_s']:>8.0f}{row['decode_tok_s']:>8.0f}"
              + "".join(f"{row['verify_ms'][str(k)]:>6.1f}" for k in VERIFY_ROWS)
              + f"{row['rss_mb']:>6.0f}{'exact' if row['batch_invariant'] else format(row['max_diff'], '.2f'):>10}"
              f"{row['next_token_accuracy']:>6.1%}", flush=True)
    best, why = choose(rows)
    print(f"choice: weights {best['weights']}, repack {best['repack']}, ubatch {best['ubatch']}, "
          f"{best['build']}: {why}")
    if json_out:
        Path(json_out).write_text(json.dumps({"rows": rows, "choice": best, "why": why}, indent=2))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", required=True)
    parser.add_argument("--model", default="")
    parser.add_argument("--threads", type=int, default=0)
    a = parser.parse_args()
    c = json.loads(a.one)
    print(json.dumps(measure(a.model, c["weights"], c["repack"], c["ubatch"], a.threads)))
