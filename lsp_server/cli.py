"""The `specfill` command: serve, complete, demo, benches, check, schema."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def cmd_serve(args: argparse.Namespace) -> int:
    """stdio by default; TCP on loopback with --port. LSP has no authentication and the server
    reads your files, so listening beyond this machine takes a second, explicit flag."""
    if args.port is not None and args.host not in LOOPBACK:
        if not args.allow_remote_clients:
            print(f"specfill: refusing to listen on {args.host}: anyone who reaches that address could read files "
                  "through the server. Add --allow-remote-clients if you mean it.", file=sys.stderr)
            return 2
        print(f"specfill: WARNING: listening on {args.host}:{args.port} without authentication; "
              "every client that reaches it can read the workspace through completions.", file=sys.stderr)
    from lsp_server.logs import add_file
    from lsp_server.server import create_server

    server = create_server()

    if args.log_file:
        try:
            add_file(args.log_file)
        except OSError as exc:
            print(f"specfill: cannot write the log file {args.log_file}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    try:
        if args.port is None:
            server.start_io()
        else:
            print(f"specfill: listening on {args.host}:{args.port}", file=sys.stderr, flush=True)
            server.start_tcp(args.host, args.port)
    finally:
        server.worker.stop()  # the editor went away: end a cost profile now, not at its end
    return 0


def cmd_attach(args: argparse.Namespace) -> int:
    from lsp_server import attach

    return attach.main(args.socket, args.idle_exit)


def cmd_daemon(args: argparse.Namespace) -> int:
    from lsp_server import daemon

    return daemon.main(args.socket, args.idle_exit)


def cmd_status(args: argparse.Namespace) -> int:
    from lsp_server.shared_status import main as status

    return status(args.socket, args.json)


def cmd_complete(args: argparse.Namespace) -> int:
    from lsp_server.postprocess import for_cursor
    from lsp_server.settings import Settings
    from lsp_server.worker import ModelWorker
    from speculative import ModelError

    try:
        text = Path(args.file).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        print(f"specfill: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    lines = text.split("\n")
    if not (1 <= args.line <= len(lines)) or not (0 <= args.col <= len(lines[args.line - 1])):
        print(f"specfill: position {args.line}:{args.col} is outside {args.file}", file=sys.stderr)
        return 2
    offset = sum(len(ln) + 1 for ln in lines[: args.line - 1]) + args.col
    settings = Settings()
    settings.model.path = args.model or ""
    settings.completion.max_tokens = args.max_tokens
    if args.prompt_budget_ms is not None:
        settings.completion.prompt_budget_ms = args.prompt_budget_ms
    worker = ModelWorker()
    try:
        worker.load(settings).result()
    except ModelError as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2
    prefix, suffix = text[:offset], text[offset:]
    result = worker.complete(prefix, suffix, args.file, settings).result()
    worker.shutdown()
    if result is None:
        print(f"specfill: no prompt could be built at {args.line}:{args.col}", file=sys.stderr)
        return 1
    print(for_cursor(result.text, prefix, suffix, args.file).text)
    print(f"-- ttft {result.ttft_ms:.0f} ms, {len(result.tokens)} tokens, {result.tok_s:.1f} tok/s, "
          f"prompt {result.n_prompt} tokens" + (" (the short one: the full prompt could not be read within "
                                                 f"{settings.completion.prompt_budget_ms} ms)" if result.short else "")
          + (f", healed {result.healed!r}" if result.healed else "") + f", stop: {result.stop_reason}", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from bench.demo import run_demo

    return run_demo(args.model, args.file)


def cmd_bench_ttft(args: argparse.Namespace) -> int:
    from bench.ttft import main as bench

    return bench(args.model, args.source, args.tokens, args.repeat, args.json)


def cmd_workload(args: argparse.Namespace) -> int:
    from bench.workload import main as workload

    return workload(args.source, args.kind, args.n, args.seed, args.out)


def cmd_bench(args: argparse.Namespace) -> int:
    from bench.decoding import main as bench
    from speculative.model_file import ModelError

    try:
        return bench(args.workload, args.model, args.draft_model, args.modes, args.max_tokens,
                     args.prompt_tokens, args.n_ctx, args.threads, args.json, args.max_draft, args.weights)
    except (ModelError, ValueError, OSError) as exc:
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


def _measure_costs(path, weights: str, build: str):
    """The cost table the server would otherwise measure at its first start, before the first
    suggestion: measured where an install already waits, and cached for the server (same model
    file, default threads and build). Opened as the server opens it: a converted file llama.cpp
    cannot load is converted again. (costs, the weights loaded)"""
    from lsp_server.local import open_engine
    from lsp_server.settings import Settings
    from speculative.cost_model import load_cost_model

    warnings: list[str] = []
    engine, loaded = open_engine(path, weights, Settings().model.n_ctx, None, warnings)
    try:
        costs = load_cost_model(engine, engine.n_threads, build)
    finally:
        engine.close()
    for warning in warnings:
        print(f"specfill: {warning}", file=sys.stderr)
    return costs, loaded


def cmd_check(args: argparse.Namespace) -> int:
    """What an install and an editor's health check need: the version, the llama.cpp build, the
    model file and the weights loaded for it (converted here, once, when the setting asks)."""
    from lsp_server import __version__
    from speculative.build_info import build_info
    from speculative.convert import weights_path
    from speculative.cpu_buffers import extra_buffer_types
    from speculative.model_file import ModelError, resolve_model_path

    try:
        path = resolve_model_path(args.model or "")
        weights = weights_path(path, args.weights)
    except ModelError as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2
    build = build_info()
    info: dict[str, Any] = {"version": __version__, "python": sys.version.split()[0], "model": str(path),
            "model_mb": round(path.stat().st_size / 1e6), "weights": str(weights), **build,
            "extra_buffers": list(extra_buffer_types())}
    costs = None
    if args.costs:
        try:
            costs, loaded = _measure_costs(path, args.weights, build["build"])
        except ModelError as exc:
            print(f"specfill: {exc}", file=sys.stderr)
            return 2
        info["weights"] = str(loaded)
        info["verify_costs"] = "measured" if costs.measured else "cached"
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"specfill {__version__} (Python {info['python']})")
    print(f"model {path} ({info['model_mb']} MB)" + (f", loaded as {weights}" if weights != path else ""))
    print("llama-cpp-python " + ", ".join(f"{k} {v}" for k, v in build.items())
          + f", extra buffers {'+'.join(info['extra_buffers']) or 'none'}")
    if costs is not None:
        print(f"verify costs {info['verify_costs']} ({costs.not_saved or 'cached for the server'})")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from bench import schema_export
    from lsp_server.settings import schema

    if args.write:
        try:
            changed = schema_export.write(Path(args.root))
        except FileNotFoundError as exc:
            print(f"specfill: {exc}", file=sys.stderr)
            return 2
        for path in changed:
            print(f"updated {path}")
        return 0
    print(json.dumps(schema(), indent=2))
    return 0


def _add_runtime_commands(sub) -> None:
    """What users and the editors run."""
    from lsp_server.settings import WEIGHTS

    p = sub.add_parser("serve", help="run the language server on stdio (or TCP with --port)")
    p.add_argument("--port", type=int, help="listen on TCP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="TCP address (default 127.0.0.1: this machine only)")
    p.add_argument("--allow-remote-clients", action="store_true",
                   help="let --host be an address other machines reach (no authentication: be sure)")
    p.add_argument("--log-file", default=os.environ.get("SPECFILL_LOG_FILE") or None,
                   help="also append the server's log (at the logLevel setting) to this file "
                        "(default: $SPECFILL_LOG_FILE, for servers an editor starts)")
    p.set_defaults(func=cmd_serve)
    _add_shared_commands(sub)
    p = sub.add_parser("complete", help="print one completion and its timings")
    p.add_argument("file")
    p.add_argument("--line", type=int, required=True, help="1-based line")
    p.add_argument("--col", type=int, required=True, help="0-based column")
    p.add_argument("--model", help="GGUF file (default: the embedded SmolLM2-135M)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--prompt-budget-ms", type=int, help="completion.promptBudgetMs (0: read the whole prompt first)")
    p.set_defaults(func=cmd_complete)
    p = sub.add_parser("demo", help="start the real server and replay typing into a sample file")
    p.add_argument("--model")
    p.add_argument("--file", help="file to type into (default: a copy of the sample shipped with specfill)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("check", help="the version, the llama.cpp build and the model (installs, health checks)")
    p.add_argument("--model", help="GGUF path or packaged name (default: the embedded SmolLM2-135M)")
    p.add_argument("--weights", default="auto", choices=WEIGHTS, help="as model.weights")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--costs", action="store_true",
                   help="also measure (once) and cache the verify costs the server needs at its first start")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("schema", help="print the settings schema as JSON; --write regenerates the editors' copies")
    p.add_argument("--write", action="store_true", help="regenerate the copies in a source checkout (--root)")
    p.add_argument("--root", default=".", help="the specfill source checkout (default: the current folder)")
    p.set_defaults(func=cmd_schema)


def _add_shared_commands(sub) -> None:
    """The shared server: one per user and build, reached by every editor window."""
    for name, func, text in (
            ("attach", cmd_attach, "join stdio to the shared server, starting it when none answers (what editors run)"),
            ("daemon", cmd_daemon, "run the shared server on its socket (attach starts it)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--socket", help="the socket (default: $XDG_RUNTIME_DIR/specfill/specfill-VERSION-BUILD.sock)")
        p.add_argument("--idle-exit", type=float, default=300.0, metavar="SECONDS",
                       help="the shared server exits this long after its last session (default 300)")
        p.set_defaults(func=func)
    p = sub.add_parser("status", help="the shared server of this install: its build, sessions, models and memory")
    p.add_argument("--socket", help="the socket (default: this install's)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_status)


def _add_bench_commands(sub) -> None:
    """Workloads and the engine-level benches."""
    from lsp_server.settings import WEIGHTS

    p = sub.add_parser("workload", help="write completion cases cut from real files (JSONL)")
    p.add_argument("--from", dest="source", required=True, help="folder of source files")
    p.add_argument("--kind", choices=["fim", "edit", "copy", "crossfile"], default="fim")
    p.add_argument("--n", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="file to write (default: stdout)")
    p.set_defaults(func=cmd_workload)
    p = sub.add_parser("bench", help="every decoding mode on every workload case, side by side")
    p.add_argument("--workload", required=True, help="JSONL file from `specfill workload`")
    p.add_argument("--model", help="GGUF path or packaged name (smollm2-135m, gemma3-270m)")
    p.add_argument("--draft-model", help="GGUF for the draft mode (default: the target itself)")
    p.add_argument("--modes", default="plain,anchor,lookup,draft,auto")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--prompt-tokens", type=int, default=1024, help="prompt budget in tokens")
    p.add_argument("--max-draft", type=int, default=16, help="most drafted tokens a step (speculation.maxDraft)")
    p.add_argument("--weights", default="auto", choices=WEIGHTS, help="as model.weights")
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--threads", type=int, default=0, help="0 = all cores")
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("bench-ttft", help="cold prefill vs warm TTFT after one keystroke")
    p.add_argument("--model")
    p.add_argument("--source", default=argparse.__file__, help="a text of --tokens tokens or more "
                   "(default: the standard library's argparse.py)")
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json")
    p.set_defaults(func=cmd_bench_ttft)


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


def main(argv: list[str] | None = None) -> int:
    from lsp_server import __version__

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["attach"]:  # what every editor window starts: parse nothing else
        p = argparse.ArgumentParser(prog="specfill attach")
        _add_shared_commands(p.add_subparsers(dest="cmd", required=True))
        args = p.parse_args(argv)
        return args.func(args)

    parser = argparse.ArgumentParser(prog="specfill", description="Inline code completion from local GGUF models.")
    parser.add_argument("--version", action="version", version=f"specfill {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    _add_runtime_commands(sub)
    _add_bench_commands(sub)
    _add_server_bench_commands(sub)
    args = parser.parse_args(argv)
    return args.func(args)
