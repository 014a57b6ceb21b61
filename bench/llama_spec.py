"""`specfill bench-llama-server`: llama.cpp's own speculation on the prompts `specfill bench` uses.

llama-server (the build `make llama-server` makes) decodes each case's prompt tokens greedily
three ways: plain, with the draft model (`--model-draft`, draft-simple) and with its n-gram
drafts (ngram-mod). Decode tokens/s come from the server's own timings (prompt reading apart),
so they compare with `specfill bench`'s decode tokens/s on the same cases and files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.code_server import free_port
from bench.machine import cpu_flags
from bench.workload import load_workload
from prompts import PromptError, build_prompt, family_for, prompt_tokens
from speculative.convert import weights_path
from speculative.engine import Engine

LLAMA_SERVER = Path(__file__).resolve().parent.parent / ".tools" / "llama-server" / "llama-server"


def _prompts(path: Path, workload: str, budget: int) -> list[tuple[list[int], tuple[str, ...]]]:
    """Each case's prompt tokens and stop strings, built as `specfill bench` builds them."""
    engine = Engine(path, n_ctx=max(budget + 64, 512), n_threads=1)
    try:
        family, out = family_for(engine), []
        for case in load_workload(workload):
            parts = build_prompt(family, case["prefix"], case["suffix"], case["path"])
            try:
                out.append((prompt_tokens(engine, parts, budget), parts.stop))
            except PromptError:
                continue
        return out
    finally:
        engine.close()


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def _serve(argv: list[str], port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited: {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"llama-server did not start: {log.read_text()[-1500:]}")


@dataclass
class ServerRun:
    """One llama-server's decoding of every prompt: tokens after each first, their ms, drafts."""

    tokens: int = 0
    ms: float = 0.0
    drafted: int = 0
    accepted: int = 0
    texts: list[str] = field(default_factory=list)

    @property
    def tok_s(self) -> float:
        return 1000 * self.tokens / self.ms if self.ms else 0.0


def run_mode(model: Path, extra: list[str], prompts, max_tokens: int, threads: int, n_ctx: int) -> ServerRun:
    """One llama-server with `extra` flags over every prompt."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    argv = [str(LLAMA_SERVER), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(n_ctx),
            "-t", str(threads), "-tb", str(threads), "-np", "1", "--no-ui", *extra]
    proc = _serve(argv, port, log)
    out = ServerRun()
    try:
        for ids, stop in prompts:
            r = _post(f"http://127.0.0.1:{port}/completion",
                      {"prompt": ids, "n_predict": max_tokens, "temperature": 0, "top_k": 1, "stop": list(stop),
                       "cache_prompt": False, "samplers": ["top_k"]})
            t = r.get("timings", {})
            n = int(t.get("predicted_n", 0))
            out.tokens += max(0, n - 1)  # as specfill bench: the tokens after the first
            out.ms += float(t.get("predicted_ms", 0.0)) * (1 - 1 / max(1, n))
            out.drafted += int(t.get("draft_n", 0))
            out.accepted += int(t.get("draft_n_accepted", 0))
            out.texts.append(r.get("content", ""))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        log.unlink(missing_ok=True)
    return out


def main(workload: str, model: str | None, draft_model: str, max_tokens: int, prompt_budget: int,
         n_max: int, threads: int, json_out: str | None) -> int:
    from bench.regime import resolve  # gguf-py, a test extra: only when a bench runs

    if not LLAMA_SERVER.exists():
        raise OSError(f"{LLAMA_SERVER} is missing: run `make llama-server`")
    threads = threads or os.cpu_count() or 1
    target, draft = weights_path(resolve(model), "auto"), weights_path(resolve(draft_model), "auto")
    prompts = _prompts(target, workload, prompt_budget)
    n_ctx = prompt_budget + max_tokens + 64
    modes = {"plain": [], "draft": ["-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(n_max),
                                    "-td", str(threads)],
             "ngram-mod": ["--spec-type", "ngram-mod"]}
    runs = {m: run_mode(target, extra, prompts, max_tokens, threads, n_ctx) for m, extra in modes.items()}
    plain = runs["plain"]
    print(f"llama-server on {target} (draft {draft}), {len(prompts)} cases from {workload}, {threads} threads, "
          f"CPU flags {cpu_flags()}")
    print(f"{'mode':<10}{'speedup':>8}{'tok/s':>8}{'drafted':>9}{'accepted':>9}{'same text':>10}")
    rows: dict[str, dict] = {}
    report = {"model": str(target), "draft": str(draft), "cases": len(prompts), "cpu_flags": cpu_flags(),
              "threads": threads, "modes": rows}
    for name, m in runs.items():
        speedup = m.tok_s / plain.tok_s if plain.tok_s else 0.0
        same = sum(a == b for a, b in zip(m.texts, plain.texts, strict=True)) / max(1, len(prompts))
        print(f"{name:<10}{speedup:>7.2f}x{m.tok_s:>8.1f}{m.drafted:>9d}{m.accepted:>9d}{same:>10.2f}")
        rows[name] = {**asdict(m), "tok_s": m.tok_s, "speedup": speedup, "same_text": same}
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2))
    return 0
