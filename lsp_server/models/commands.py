"""`specfill model list` and `specfill model pull`: what the editors' model menus run. With
--json they print one JSON object a line (progress, then done, error or cancelled)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from lsp_server.models.catalog import BY_NAME, N_CTX, hub_file, listing, pulled
from speculative.errors import ModelError

PROGRESS_EVERY_S = 0.2


def cmd_list(args: argparse.Namespace) -> int:
    models = listing()
    if args.json:
        print(json.dumps(models))
        return 0
    print(f"{'name':21} {'file':>8} {'memory':>8}  {'draft':20} {'pulled':6}  for")
    for m in models:
        print(f"{m['name']:21} {m['size_mb'] / 1000:>6.1f}GB {m['memory_mb'] / 1000:>6.1f}GB  {m['draft'] or '-':20} "
              f"{'yes' if m['pulled'] else 'no':6}  {m['machine']}")
    print(f"memory: the file, its KV cache at {N_CTX:,} tokens and the server; a draft adds its own")
    return 0


class Reporter:
    """Progress to the editor (--json) or the terminal, at most every PROGRESS_EVERY_S."""

    def __init__(self, as_json: bool, label: str) -> None:
        self.as_json, self.label, self.last, self.done, self.total = as_json, label, 0.0, 0, 0

    def emit(self, event: str, **fields: Any) -> None:
        if self.as_json:
            print(json.dumps({"event": event, **fields}), flush=True)
        elif event == "error":
            print(f"specfill: {fields['message']}", file=sys.stderr)

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY_S and done < total:
            return
        self.last = now
        if self.as_json:
            self.emit("progress", done=done, total=total)
        else:
            print(f"\r{self.label}: {done / 1e6:,.0f} / {total / 1e6:,.0f} MB ({100 * done // max(total, 1)}%)",
                  end="", file=sys.stderr, flush=True)


def _cancel(*_: object) -> None:
    raise KeyboardInterrupt  # the editor's cancel (SIGTERM): unwind, so the .part stays whole for a resume


def cmd_pull(args: argparse.Namespace) -> int:
    from lsp_server.models.pull import PullError, pull

    try:
        repo, file, entry = hub_file(args.name)
    except ModelError as exc:
        Reporter(args.json, "").emit("error", message=str(exc))
        return 2
    report = Reporter(args.json, f"pulling {file}")
    signal.signal(signal.SIGTERM, _cancel)
    try:
        path = pull(repo, file, report)
    except PullError as exc:
        report.emit("error", message=str(exc))
        return 1
    except OSError as exc:  # the cache folder itself: not writable, not creatable
        report.emit("error", message=f"cannot write the model cache ({exc}): check SPECFILL_CACHE_DIR")
        return 1
    except KeyboardInterrupt:
        report.emit("cancelled", done=report.done, total=report.total)
        if not args.json:
            print(f"\nspecfill: cancelled; {report.done / 1e6:,.0f} MB kept, pulling again goes on from there",
                  file=sys.stderr)
        return 130
    name = entry.name if entry else args.name
    draft = BY_NAME[entry.draft] if entry and entry.draft else None
    if args.json:
        report.emit("done", name=name, path=str(path), draft=draft.name if draft else "",
                    draft_pulled=bool(draft and pulled(draft)))
        return 0
    print(f"\npulled {path}\nuse it: model.path = {name!r}", file=sys.stderr)
    if draft:
        print(f"its draft: specfill model pull {draft.name}, then model.draftPath = {draft.name!r}", file=sys.stderr)
    return 0


def register(sub) -> None:
    model = sub.add_parser("model", help="the curated code models: list them, download one on request")
    what = model.add_subparsers(dest="model_cmd", required=True)
    p = what.add_parser("list", help="the models specfill knows, their size and memory, and which are pulled")
    p.add_argument("--json", action="store_true", help="one JSON list")
    p.set_defaults(func=cmd_list)
    p = what.add_parser("pull", help="download a model (resumed after an interruption, checked by its sha256); "
                                     "honours HF_ENDPOINT and HF_TOKEN")
    p.add_argument("name", help="a name from `specfill model list`, or a hub file: owner/name/file.gguf")
    p.add_argument("--json", action="store_true", help="progress and the outcome as JSON lines (the editors)")
    p.set_defaults(func=cmd_pull)
