"""`specfill bench-lsp`: the real server over stdio, typing each case's middle at a pace.

Per case the cursor lands (open the file, then the first keystroke at once: no warm-up, no
cursor hint, as a plain LSP client does; `--warm` adds an untimed request at open, `--focus`
sends specfill/didFocus at open as the editors do) and types the middle one character a
keystroke, each a didChange and an inlineCompletion request. Every request is awaited (the
server supersedes stale ones), so latency is not capped by the pace.

Per keystroke: `shown` if a suggestion arrived before the next keystroke, `useful` if it also
continues what is typed next; `precision` = useful / shown. `first_suggestion_ms`: from the
landing keystroke to the first non-empty suggestion that arrived while typing on (`--look-ms`
puts a pause between the open and that keystroke, as a user who reads before typing). With
`--accept`, the typist presses Tab whenever the shown suggestion continues the text, taking
what it shares with the text; `saved` is the share of characters that came from Tab.
Variants (`--variant name=JSON`) run the same cases on a fresh server each, in one run.
`--sessions N` types with N editors at once, each its share of the cases, through one shared
server (`specfill attach`) or, with `--separate`, a server each; figures per session and the
total resident memory of the server processes.
`--workspace DIR` opens the server on that folder, as an editor does, and starts typing once it
is indexed; when the cases' own files are in it, on a copy without them (the index would hand
the server the text being typed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types

from bench.lsp_client import kill_shared, server_pid, server_stats, shared_status, start_server, stop_server
from bench.machine import cpu_flags
from bench.memory import peak_rss_mb, rss_mb
from bench.positions import utf16_position
from bench.workload import load_workload
from lsp_server.session.stats import pct

LANGUAGE_IDS = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust", ".c": "c",
                ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".java": "java", ".lua": "lua", ".rb": "ruby",
                ".sh": "shellscript"}


def continues(suggestion: str, rest: str) -> bool:
    """The suggestion is what the user goes on to type (as far as either goes, on this line)."""
    first = suggestion.split("\n", 1)[0]
    rest = rest.split("\n", 1)[0]
    return bool(first.strip()) and (rest.startswith(first) or first.startswith(rest))


def shared(suggestion: str, rest: str) -> str:
    """What Tab takes for a typist who keeps only what the suggestion shares with the text."""
    return os.path.commonprefix([suggestion, rest])


@dataclass(frozen=True)
class Typist:
    """How the bench types: the pause between keystrokes, what it sends at a case's open
    (an untimed warm-up request, didFocus), and whether it presses Tab."""
    key_ms: float = 80.0
    warm: bool = False
    focus: bool = False
    accept: bool = False
    look_ms: float = 0.0  # between the open (and didFocus) and the first keystroke

    def describe(self) -> str:
        return (f"at {self.key_ms:.0f} ms a key, {'warm' if self.warm else 'cold'} landing"
                f"{', didFocus at open' if self.focus else ''}"
                f"{f', first key {self.look_ms:.0f} ms after the open' if self.look_ms else ''}"
                f"{', typist accepts' if self.accept else ''}")


@dataclass
class Tally:
    keystrokes: int = 0
    shown: int = 0
    useful: int = 0
    chars: int = 0
    saved_chars: int = 0
    accepts: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)  # every request
    warm: list[float] = field(default_factory=list)  # requests after the case's first suggestion
    first: list[float] = field(default_factory=list)  # first suggestion after landing, per case
    first_text: list[str] = field(default_factory=list)  # and its text ("" when none came)
    first_answer: list[float] = field(default_factory=list)  # the landing keystroke's answer, empty or not
    never: int = 0  # cases where no suggestion arrived while typing


async def _case(client, n: int, case: dict, typist: Typist, tally: Tally) -> None:
    uri = Path(f"/tmp/specfill-bench-lsp/{n}/{Path(case['path']).name}").as_uri()
    text = case["prefix"] + case["suffix"]
    language = LANGUAGE_IDS.get(Path(case["path"]).suffix, "plaintext")
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    version = 1

    def request(prefix: str):
        return asyncio.ensure_future(client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=utf16_position(prefix, len(prefix)),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))))

    def insert(prefix: str, piece: str) -> None:
        nonlocal version
        version += 1
        pos = utf16_position(prefix, len(prefix))
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos),
                                                                    text=piece)]))

    if typist.focus:
        client.protocol.notify("specfill/didFocus", {"textDocument": {"uri": uri},
                                                     "position": utf16_position(text, len(case["prefix"]))})
    if typist.warm:
        try:
            await asyncio.wait_for(request(case["prefix"]), 120)  # the old, untimed warm-up
        except Exception:
            tally.errors += 1
    if typist.look_ms:  # the user looks before typing: the server may read ahead meanwhile
        await asyncio.sleep(typist.look_ms / 1000)
    middle, typed = case["middle"], 0
    prefix = case["prefix"]
    landed = time.perf_counter()
    first: float | None = None
    pending: list[tuple[asyncio.Future, float, dict]] = []

    def ask(prefix: str) -> tuple[asyncio.Future, float, dict]:
        fut, arrived = request(prefix), dict[str, float]()
        fut.add_done_callback(lambda f: arrived.setdefault("t", time.perf_counter()))
        pending.append((fut, time.perf_counter(), arrived))
        return pending[-1]
    tab = ""  # what the next key press takes with Tab ("" = type the next character)
    while typed < len(middle):
        piece = tab or middle[typed]
        insert(prefix, piece)
        if tab:
            client.workspace_execute_command(types.ExecuteCommandParams(
                command="specfill.didAccept", arguments=[{"uri": uri, "length": len(tab)}]))
            tally.saved_chars += len(tab)
            tally.accepts += 1
        prefix += piece
        typed += len(piece)
        tally.chars += len(piece)
        tally.keystrokes += 1
        fut, t0, arrived = ask(prefix)
        await asyncio.wait({fut}, timeout=typist.key_ms / 1000)
        tab = ""
        suggestion = ""
        if fut.done() and fut.exception() is None and fut.result() and fut.result().items:
            suggestion = fut.result().items[0].insert_text
        if suggestion.strip():  # shown before the next key press
            tally.shown += 1
            if first is None:
                first = arrived.setdefault("t", time.perf_counter()) - landed
                tally.first_text.append(suggestion)
            rest = middle[typed:]
            if continues(suggestion, rest):
                tally.useful += 1
                tab = shared(suggestion, rest) if typist.accept else ""
        await asyncio.sleep(max(0.0, typist.key_ms / 1000 - (time.perf_counter() - t0)))
    done_at = time.perf_counter()
    await asyncio.wait([f for f, _, _ in pending], timeout=120)
    await asyncio.sleep(0)  # let the done callbacks record arrivals
    if pending and pending[0][0].done() and pending[0][0].exception() is None:
        tally.first_answer.append((pending[0][2]["t"] - pending[0][1]) * 1000)
    for fut, t0, arrived in pending:
        if not fut.done() or fut.exception() is not None:
            tally.errors += 1
            continue
        ms = arrived["t"] - t0
        tally.latencies.append(ms * 1000)
        if first is not None and t0 - landed > first:
            tally.warm.append(ms * 1000)
    if first is None:
        tally.never += 1
        tally.first_text.append("")
        tally.first.append((done_at - landed) * 1000)  # censored: at least this long
    else:
        tally.first.append(first * 1000)
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


async def _type_cases(client, cases: list[tuple[int, dict]], typist: Typist, progress: list[int],
                      total: int) -> Tally:
    tally = Tally()
    for n, case in cases:
        await _case(client, n, case, typist, tally)
        progress[0] += 1
        sys.stderr.write(f"\r{progress[0]}/{total} cases")
    return tally


async def _run(cases: list[dict], typist: Typist, settings: dict,
               workspace: str | None = None) -> dict:
    client = await start_server("specfill-bench-lsp", settings, workspace=workspace)
    t0 = time.perf_counter()
    tally = await _type_cases(client, list(enumerate(cases)), typist, [0], len(cases))
    stats = await server_stats(client)
    peak_rss = peak_rss_mb(server_pid(client))
    await stop_server(client)
    sys.stderr.write("\n")
    return _report(tally, stats, cases, typist, settings, workspace, t0) | {
        "server_peak_rss_mb": peak_rss}


async def _run_sessions(cases: list[dict], sessions: int, separate: bool, typist: Typist, settings: dict) -> dict:
    """`sessions` editors typing at once, each its share of the cases: through one shared
    server (`specfill attach`, in a runtime folder of its own), or with `separate` a server each."""
    with tempfile.TemporaryDirectory(prefix="specfill-bench-sessions-") as runtime:
        env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
        command = ("serve",) if separate else ("attach",)
        clients = [await start_server(f"specfill-bench-lsp-{i}", settings, command=command, env=env)
                   for i in range(sessions)]
        try:
            t0 = time.perf_counter()
            progress = [0]
            tallies = await asyncio.gather(*(
                _type_cases(c, list(enumerate(cases))[i::sessions], typist, progress, len(cases))
                for i, c in enumerate(clients)))
            sys.stderr.write("\n")
            stats = [await server_stats(c) for c in clients]
            if separate:
                pids = [server_pid(c) for c in clients]
            else:
                pids = [(await shared_status(clients[0]))["pid"], *(server_pid(c) for c in clients)]
            rss = sum(rss_mb(pid) for pid in set(pids))
            reports = {f"session {i + 1}": _report(t, st, cases[i::sessions], typist, settings, None, t0)
                       for i, (t, st) in enumerate(zip(tallies, stats, strict=True))}
        finally:
            for c in clients:
                await stop_server(c)
            if not separate:
                await asyncio.sleep(0.5)  # the attach processes end; the server ends after its idle time
                kill_shared(runtime)
    return {"sessions": sessions, "separate": separate, "rss_total_mb": rss, "reports": reports}


def _report(tally: Tally, stats: dict, cases: list[dict], typist: Typist, settings: dict, workspace: str | None,
            t0: float) -> dict:
    k = tally.keystrokes or 1
    remote = stats.get("remote") or {}
    return {
        "n_cases": len(cases), "keystrokes": tally.keystrokes, "key_ms": typist.key_ms,
        "mode": "warm" if typist.warm else "cold", "focus": typist.focus, "accept": typist.accept,
        "settings": settings, "workspace": workspace,
        "workspace_files": (stats.get("workspace") or {}).get("files", 0), "wall_s": time.perf_counter() - t0,
        "first_suggestion_ms": {"p50": pct(tally.first, 0.5), "p95": pct(tally.first, 0.95),
                                "max": max(tally.first, default=0.0), "never": tally.never,
                                "cases": [round(ms) for ms in tally.first], "texts": tally.first_text,
                                # a one-character first suggestion is right or wrong as any other,
                                # but saves little: how many there are, to read the figure by
                                "one_char": sum(len(t.strip()) == 1 for t in tally.first_text)},
        # The landing keystroke's answer, shown or not: latency alone, apart from what the
        # confidence cut hides (then the first suggestion comes a keystroke or more later).
        "first_answer_ms": {"p50": pct(tally.first_answer, 0.5), "p95": pct(tally.first_answer, 0.95),
                            "max": max(tally.first_answer, default=0.0)},
        "latency_ms": {"p50": pct(tally.latencies, 0.5), "p95": pct(tally.latencies, 0.95),
                       "p99": pct(tally.latencies, 0.99)},
        "warm_latency_ms": {"p50": pct(tally.warm, 0.5), "p95": pct(tally.warm, 0.95), "p99": pct(tally.warm, 0.99)},
        "answered": len(tally.latencies),
        "ttft_ms": stats["ttft_ms"], "ttft_cold_ms": stats["ttft_cold_ms"], "ttft_warm_ms": stats["ttft_warm_ms"],
        "cache_hit_rate": stats["cache_hits"] / stats["requests"] if stats["requests"] else 0.0,
        "shown": tally.shown / k, "useful": tally.useful / k,
        "precision": tally.useful / tally.shown if tally.shown else 0.0,
        "saved": tally.saved_chars / tally.chars if tally.chars else 0.0, "accepts": tally.accepts,
        # keys a Tab-typist did not press: characters Tab took, less the Tab presses
        "keys_saved": (tally.saved_chars - tally.accepts) / tally.chars if tally.chars else 0.0,
        "errors": tally.errors + stats["errors"],
        "connections_per_100_keystrokes": 100 * remote.get("connections", 0) / k if remote else None,
        "server": {key: stats.get(key) for key in (
            "requests", "cache_hits", "superseded", "short", "draft_answers", "healed", "hidden", "cut", "words",
            "word_answers",
            "acceptance_rate",
            "model", "model_file", "extra_buffers", "prompt_tok_s", "warm_places", "read_ahead_tokens")}
                  | {"build": stats["build"]["build"]},
    }


@contextlib.contextmanager
def without_cases(workspace: str | None, cases: list[dict]) -> Iterator[tuple[str | None, int]]:
    """(the folder to open the server on, how many case files were left out): `workspace`
    itself, or a temporary copy without the cases' own files when some are in it."""
    root = Path(workspace).resolve() if workspace else None
    inside = {p for c in cases if root and (p := Path(c["path"]).resolve()).is_relative_to(root)}
    if root is None or not inside:
        yield workspace, 0
        return
    with tempfile.TemporaryDirectory(prefix="specfill-bench-ws-") as tmp:
        copy = Path(tmp) / root.name
        shutil.copytree(root, copy, symlinks=True,
                        ignore=lambda d, names: [n for n in names if Path(d).resolve() / n in inside])
        yield str(copy), len(inside)


def _print(name: str, r: dict) -> None:
    f, w, lat = r["first_suggestion_ms"], r["warm_latency_ms"], r["latency_ms"]
    print(f"{name:<16}{r['first_answer_ms']['p95']:>10.0f}{f['p50']:>7.0f}{f['p95']:>7.0f}{f['max']:>7.0f}{f['never']:>5d}"
          f"{w['p50']:>7.0f}{w['p95']:>7.0f}{lat['p50']:>7.0f}{lat['p95']:>7.0f}{lat['p99']:>7.0f}"
          f"{r['shown']:>7.2f}{r['useful']:>7.2f}{r['precision']:>7.2f}{r['saved']:>7.2f}{r['keys_saved']:>6.2f}"
          f"{r['server_peak_rss_mb'] if 'server_peak_rss_mb' in r else 0:>6.0f}{r['errors']:>5d}")


def _together(sessions: int, separate: bool) -> str:
    if sessions == 1:
        return ""
    return f", {sessions} sessions at once on " + ("a server each" if separate else "one shared server")


def main(workload: str, typist: Typist, json_out: str | None, settings: dict | None = None,
         variants: Sequence[tuple[str, dict]] = (), workspace: str | None = None, sessions: int = 1,
         separate: bool = False) -> int:
    cases = load_workload(workload)
    with without_cases(workspace, cases) as (folder, left_out):
        return _main(cases, workload, typist, json_out, settings, variants, folder,
                     sessions, separate, f" (a copy without the cases' {left_out} files)" if left_out else "")


def _main(cases: list[dict], workload: str, typist: Typist, json_out: str | None, settings: dict | None,
          variants: Sequence[tuple[str, dict]], workspace: str | None,
          sessions: int, separate: bool, copied: str) -> int:
    runs = [("default", settings or {}), *variants]
    reports = {}
    print(f"{len(cases)} cases from {workload} {typist.describe()}"
          f"{f', workspace {workspace}{copied}' if workspace else ''}"
          f"{_together(sessions, separate)}; "
          f"{os.cpu_count()} cores, CPU flags: {cpu_flags()}")
    if sessions > 1:
        together = asyncio.run(_run_sessions(cases, sessions, separate, typist, settings or {}))
        reports = together["reports"]
    else:
        for name, s in runs:
            reports[name] = asyncio.run(_run(cases, typist, s, workspace))
    first = next(iter(reports.values()))
    rss = (f"server RSS in all {together['rss_total_mb']:.0f} MiB" if sessions > 1 else
           "server peak RSS " + ", ".join(f"{r['server_peak_rss_mb']:.0f}" for r in reports.values()) + " MiB")
    print(f"model {first['server']['model_file'] or first['server']['model']}, build {first['server']['build']}, "
          f"extra buffers {'+'.join(first['server']['extra_buffers'] or []) or 'none'}, "
          f"prompt {first['server']['prompt_tok_s']:.0f} tok/s, "
          + (f"{first['workspace_files']} workspace files indexed, " if workspace else "") + rss)
    print(f"{'':<16}{'1st answer':>10}{'first suggestion ms':>26}{'warm ms':>14}{'all requests ms':>21}")
    print(f"{'variant':<16}{'p95':>10}{'p50':>7}{'p95':>7}{'max':>7}{'none':>5}{'p50':>7}{'p95':>7}{'p50':>7}{'p95':>7}"
          f"{'p99':>7}{'shown':>7}{'useful':>7}{'prec.':>7}{'saved':>7}{'keys':>6}{'RSS':>6}{'err':>5}")
    for name, r in reports.items():
        _print(name, r)
    if json_out:
        out = together if sessions > 1 else reports if variants else reports["default"]
        Path(json_out).write_text(json.dumps(out, indent=2))
    return 0
