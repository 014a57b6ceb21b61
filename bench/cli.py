"""bench's commands for `specfill`: registered through the `specfill.commands` entry point, so
the server's command line lists them without importing this package."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lsp_server.settings import WEIGHTS


def register(sub) -> None:
    """Add the bench commands to `specfill`'s subcommands."""
    _add_bench_commands(sub)
    _add_server_bench_commands(sub)


def cmd_demo(args: argparse.Namespace) -> int:
    from bench.demo import run_demo

    return run_demo(args.model, args.file)


def cmd_bench_ttft(args: argparse.Namespace) -> int:
    from bench.ttft import main as bench

    return bench(args.model, args.source, args.tokens, args.repeat, args.json)


def cmd_workload(args: argparse.Namespace) -> int:
    from bench.workload import main as workload

    return workload(args.source, args.kind, args.n, args.seed, args.out)


def cmd_regime(args: argparse.Namespace) -> int:
    from bench.regime import main as regime

    return regime(args.names)


def cmd_bench_costs(args: argparse.Namespace) -> int:
    from bench.costs import main as bench
    from speculative.model_file import ModelError

    try:
        return bench(args.model, args.threads, args.runs, args.json)
    except (ModelError, ValueError, OSError) as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2


def cmd_bench(args: argparse.Namespace) -> int:
    from bench.decoding import main as bench
    from speculative.model_file import ModelError

    try:
        return bench(args.workload, args.model, args.draft_model, args.modes, args.max_tokens,
                     args.prompt_tokens, args.n_ctx, args.threads, args.json, args.max_draft, args.weights)
    except (ModelError, ValueError, OSError) as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2


def cmd_bench_llama_server(args: argparse.Namespace) -> int:
    from bench.llama_spec import main as bench
    from speculative.model_file import ModelError

    try:
        return bench(args.workload, args.model, args.draft_model, args.max_tokens, args.prompt_tokens, args.max_draft,
                     args.threads, args.json)
    except (ModelError, ValueError, OSError, RuntimeError) as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2


def cmd_bench_lsp(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from bench.lsp import Typist
    from bench.lsp import main as bench_lsp

    try:
        settings = json.loads(args.settings) if args.settings else {}
        variants = []
        for v in args.variant or []:
            name, sep, raw = v.partition("=")
            if not sep:
                raise ValueError(f"--variant {v!r}: expected NAME=JSON")
            variants.append((name, json.loads(raw)))
        if args.workspace and not Path(args.workspace).is_dir():
            raise ValueError(f"--workspace {args.workspace}: not a folder")
        if args.sessions < 1 or (args.sessions > 1 and (variants or args.workspace)):
            raise ValueError("--sessions takes a number from 1, and goes without --variant and --workspace")
        typist = Typist(warm=args.warm, focus=args.focus, accept=args.accept, look_ms=args.look_ms)
        if args.key_ms is not None:
            typist = replace(typist, key_ms=args.key_ms)
        return bench_lsp(args.workload, typist, args.json, settings, variants, args.workspace, args.sessions,
                         args.separate)
    except (ValueError, OSError) as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2


def cmd_bench_memory(args: argparse.Namespace) -> int:
    from bench.shared_memory import main as bench_memory

    try:
        counts = [int(n) for n in args.windows.split(",")]
    except ValueError:
        print(f"specfill: --windows {args.windows!r}: expected numbers, e.g. 1,2,4", file=sys.stderr)
        return 2
    return bench_memory(counts, args.vscode)


def cmd_bench_engine(args: argparse.Namespace) -> int:
    from bench.engine_configs import main as bench_engine

    return bench_engine(args.model or "", args.threads, args.stock_wheels, args.json, args.all, args.repeat)


def cmd_stress(args: argparse.Namespace) -> int:
    from bench.stress import main as stress

    return stress(args.edits, args.cancels, args.seconds, args.rate, args.seed, args.json)


def _add_bench_commands(sub) -> None:
    """Workloads, the demo and the engine-level benches."""
    p = sub.add_parser("workload", help="write completion cases cut from real files (JSONL)")
    p.add_argument("--from", dest="source", required=True, help="folder of source files")
    p.add_argument("--kind", choices=["fim", "edit", "copy", "crossfile"], default="fim")
    p.add_argument("--n", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="file to write (default: stdout)")
    p.set_defaults(func=cmd_workload)
    p = sub.add_parser("regime", help="build heavier twins, truncated drafts, drafts without middle layers and "
                                      "real-shape models for benches, once, into the cache (e.g. twin:4 twin:10 "
                                      "trunc:20 skip:14-15 shape:qwen2.5-coder-1.5b)")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(func=cmd_regime)
    p = sub.add_parser("bench-costs", help="prompt reading, step and verify costs of models side by side (e.g. a "
                                           "twin against a real shape of the same weight bytes)")
    p.add_argument("--model", action="append", required=True,
                   help="GGUF path, packaged name or `specfill regime` name; repeat to compare")
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--runs", type=int, default=5, help="runs of each figure (medians are reported)")
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench_costs)
    p = sub.add_parser("bench", help="every decoding mode on every workload case, side by side")
    p.add_argument("--workload", required=True, help="JSONL file from `specfill workload`")
    p.add_argument("--model", help="GGUF path, packaged name (smollm2-135m, gemma3-270m) or `specfill regime` name "
                                   "(twin:4)")
    p.add_argument("--draft-model", help="GGUF or regime name (trunc:20, skip:14-15) for the draft mode "
                                         "(default: the target)")
    p.add_argument("--modes", default="plain,anchor,lookup,draft,auto")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--prompt-tokens", type=int, default=1024, help="prompt budget in tokens")
    p.add_argument("--max-draft", type=int, default=16, help="most drafted tokens a step (speculation.maxDraft)")
    p.add_argument("--weights", default="auto", choices=WEIGHTS, help="as model.weights")
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("bench-llama-server", help="llama.cpp's own speculation (llama-server: plain, --model-draft, "
                       "ngram-mod) on the prompts `specfill bench` uses")
    p.add_argument("--workload", required=True, help="JSONL file from `specfill workload`")
    p.add_argument("--model", help="GGUF path, packaged name or `specfill regime` name (twin:10)")
    p.add_argument("--draft-model", required=True, help="GGUF or regime name for --model-draft")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--prompt-tokens", type=int, default=1024, help="prompt budget in tokens")
    p.add_argument("--max-draft", type=int, default=16, help="--spec-draft-n-max")
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench_llama_server)

    p = sub.add_parser("bench-ttft", help="cold prefill vs warm TTFT after one keystroke")
    p.add_argument("--model")
    p.add_argument("--source", default=argparse.__file__, help="a text of --tokens tokens or more "
                   "(default: the standard library's argparse.py)")
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench_ttft)
    p = sub.add_parser("demo", help="start the real server and replay typing into a sample file")
    p.add_argument("--model")
    p.add_argument("--file", help="file to type into (default: a copy of the sample shipped with specfill)")
    p.set_defaults(func=cmd_demo)


def _add_server_bench_commands(sub) -> None:
    """Benches of the real server and of engine configurations."""
    p = sub.add_parser("bench-lsp", help="type workload cases into the real server; latency and usefulness")
    p.add_argument("--workload", required=True, help="JSONL file from `specfill workload`")
    p.add_argument("--key-ms", type=float, help="pause between keystrokes, ms (default: the bench typist's)")
    p.add_argument("--look-ms", type=float, default=0.0,
                   help="pause between a case's open and its first keystroke, ms (default 0: at once)")
    p.add_argument("--json")
    p.add_argument("--settings", help='server settings as JSON, e.g. \'{"model": {"remote": {"url": "http://127.0.0.1:8012"}}}\'')
    p.add_argument("--variant", action="append", metavar="NAME=JSON",
                   help="also run the cases with these settings on a fresh server (repeatable), e.g. "
                        "'no-heal={\"completion\": {\"heal\": false}}'")
    p.add_argument("--warm", action="store_true", help="send an untimed request when a case opens (the old mode)")
    p.add_argument("--focus", action="store_true", help="send specfill/didFocus when a case opens, as the editors do")
    p.add_argument("--workspace", metavar="DIR",
                   help="open the server on this folder, as an editor does (indexed before typing starts)")
    p.add_argument("--accept", action="store_true",
                   help="a typist who presses Tab whenever the suggestion continues the text (reports saved)")
    p.add_argument("--sessions", type=int, default=1,
                   help="editors typing at once, each its share of the cases, on one shared server")
    p.add_argument("--separate", action="store_true", help="with --sessions: a server per session (the old way)")
    p.set_defaults(func=cmd_bench_lsp)
    p = sub.add_parser("bench-memory", help="memory of the specfill processes behind 1, 2, 4 real Neovim windows: "
                                            "one shared server against a server each")
    p.add_argument("--windows", default="1,2,4", help="window counts (default 1,2,4)")
    p.add_argument("--vscode", action="store_true",
                   help="the last window of each count is a real VS Code window (code-server, from `make editors`)")
    p.set_defaults(func=cmd_bench_memory)
    p = sub.add_parser("bench-engine", help="prompt, decode and verify speed, memory, batch invariance and accuracy "
                                            "per engine configuration (weights, repack, n_ubatch, build)")
    p.add_argument("--model", help="GGUF path or packaged name (default: the embedded SmolLM2-135M)")
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--stock-wheels", default=".wheels/llamafile-on",
                   help="folder with a llama-cpp-python wheel built with llamafile on, to compare")
    p.add_argument("--all", action="store_true", help="every combination, not the default selection")
    p.add_argument("--repeat", type=int, default=3, help="runs of each configuration (medians are reported)")
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench_engine)
    p = sub.add_parser("stress", help="random edits, cancel storms and a timed typing replay against the real server")
    p.add_argument("--edits", type=int, default=10000)
    p.add_argument("--cancels", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=60.0, help="typing replay length")
    p.add_argument("--rate", type=float, default=20.0, help="requests a second in the replay")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    p.set_defaults(func=cmd_stress)


