"""The `specfill` command: serve, attach, complete, check, schema, model; the benches and the demo
register their own commands (entry point group `specfill.commands`, `bench/cli.py`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib.metadata import entry_points
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
    from lsp_server.session.logs import add_file
    from lsp_server.session.server import create_server

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
    from lsp_server.shared import attach

    return attach.main(args.socket, args.idle_exit)


def cmd_daemon(args: argparse.Namespace) -> int:
    from lsp_server.shared import daemon

    return daemon.main(args.socket, args.idle_exit)


def cmd_status(args: argparse.Namespace) -> int:
    from lsp_server.shared.status import main as status

    return status(args.socket, args.json)


def cmd_complete(args: argparse.Namespace) -> int:
    from lsp_server.backends.worker import ModelWorker
    from lsp_server.postprocess import for_cursor
    from lsp_server.settings import Settings
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


def _measure_costs(path, weights: str, build: str):
    """The cost table the server would otherwise measure at its first start, before the first
    suggestion: measured where an install already waits, and cached for the server (same model
    file, default threads and build). Opened as the server opens it: a converted file llama.cpp
    cannot load is converted again. (costs, the weights loaded)"""
    from lsp_server.backends.local import open_engine
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


def _check_draft(target: Path, draft_arg: str, weights: str, build: str, costs) -> dict:
    """The draft model beside the target: its vocabulary checked against the target's (a clear
    error when it differs) and, with the target's costs, its step measured against theirs."""
    from lsp_server.models.catalog import model_path
    from speculative.convert import weights_path
    from speculative.drafters import check_same_vocab
    from speculative.vocab import Vocab

    draft = model_path(draft_arg)
    a, b = Vocab.load(target), Vocab.load(draft)
    try:
        check_same_vocab(a, b)
    finally:
        a.close()
        b.close()
    info: dict[str, Any] = {"draft_model": str(draft), "draft_weights": str(weights_path(draft, weights))}
    if costs is not None:
        draft_costs, _ = _measure_costs(draft, weights, build)
        info["draft_step_ms"] = round(draft_costs.cost(1), 2)
        info["draft_step_of_target"] = round(draft_costs.cost(1) / costs.cost(1), 3)
    return info


def _say_draft_partner(args: argparse.Namespace) -> None:
    """For a model of the list with a draft partner and no --draft-model, how to add it."""
    from lsp_server.models.catalog import BY_NAME, pulled

    entry = BY_NAME.get(args.model or "")
    partner = BY_NAME.get(entry.draft) if entry and not args.draft_model else None
    if partner is not None:
        how = "pulled" if pulled(partner) else f"not pulled: specfill model pull {partner.name}"
        print(f"draft partner {partner.name} ({how}); check the pair with --draft-model {partner.name} --costs, "
              f"use it with model.draftPath = {partner.name!r}")


def cmd_check(args: argparse.Namespace) -> int:
    """What an install and an editor's health check need: the version, the llama.cpp build, the
    model file and the weights loaded for it (converted here, once, when the setting asks)."""
    from lsp_server import __version__
    from lsp_server.models.catalog import model_path
    from speculative.build_info import build_info
    from speculative.convert import weights_path
    from speculative.cpu_buffers import extra_buffer_types
    from speculative.model_file import ModelError

    try:
        path = model_path(args.model or "")
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
    try:
        if args.draft_model:
            info.update(_check_draft(path, args.draft_model, args.weights, build["build"], costs))
    except ModelError as exc:
        print(f"specfill: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"specfill {__version__} (Python {info['python']})")
    print(f"model {path} ({info['model_mb']} MB)" + (f", loaded as {weights}" if weights != path else ""))
    print("llama-cpp-python " + ", ".join(f"{k} {v}" for k, v in build.items())
          + f", extra buffers {'+'.join(info['extra_buffers']) or 'none'}")
    if costs is not None:
        print(f"verify costs {info['verify_costs']} ({costs.not_saved or 'cached for the server'})")
    _say_draft_partner(args)
    if args.draft_model:
        print(f"draft model {info['draft_model']}: same vocabulary" + (
            f", a step {info['draft_step_ms']} ms = {info['draft_step_of_target']:.2f} of the target's"
            if "draft_step_ms" in info else ""))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from lsp_server import schema_export
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
    p = sub.add_parser("check", help="the version, the llama.cpp build and the model (installs, health checks)")
    p.add_argument("--model", help="GGUF path or packaged name (default: the embedded SmolLM2-135M)")
    p.add_argument("--weights", default="auto", choices=WEIGHTS, help="as model.weights")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--costs", action="store_true",
                   help="also measure (once) and cache the verify costs the server needs at its first start")
    p.add_argument("--draft-model", help="a draft model (model.draftPath): its vocabulary checked against the "
                                         "model's; with --costs its step measured against the model's")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("schema", help="print the settings schema as JSON; --write regenerates the editors' copies")
    p.add_argument("--write", action="store_true", help="regenerate the copies in a source checkout (--root)")
    p.add_argument("--root", default=".", help="the specfill source checkout (default: the current folder)")
    p.set_defaults(func=cmd_schema)
    from lsp_server.models.commands import register as model_commands

    model_commands(sub)


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
    for plugin in entry_points(group="specfill.commands"):  # bench's commands: the server never imports bench
        plugin.load()(sub)
    args = parser.parse_args(argv)
    return args.func(args)
