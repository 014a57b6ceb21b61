"""`specfill workload`: completion cases cut from real files, one JSON object a line.

kinds: `fim` a random line is the middle; `edit` a line with a near-twin among the 60 lines
above (repetitive code); `copy` a line of 20+ characters that stands verbatim within the
200 lines above (boilerplate); `crossfile` a line of code using a name that nothing above it in its
file mentions and one to three other files of the folder define (only the folder can tell the model).
The cursor always sits after the line's indentation. Files with a line of over MAX_LINE
characters (minified bundles) give no cases: nobody types them, and a bench would type such a
line one character a keystroke.
"""

from __future__ import annotations

import difflib
import json
import random
import re
from collections import defaultdict
from collections.abc import Container, Iterator
from pathlib import Path

from lsp_server.session.workspace import decode_text

CODE_SUFFIXES = {".py", ".js", ".ts", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".java", ".lua", ".rb", ".sh"}
MAX_FILE_BYTES = 512_000
MAX_LINE = 1000  # characters: a file with a longer line is generated (a minified bundle), not typed
KINDS = ("fim", "edit", "copy", "crossfile")
# A definition's name, in the languages workloads are cut from: def/class (Python), function/
# class/const/let/var (JavaScript, TypeScript), func/type (Go), fn/struct/enum/trait (Rust).
# A top-level assignment (a module's constant) defines its name too.
DEFINITION = re.compile(r"^(?:[ \t]*(?:(?:export|default|async|pub)\s+)*"
                        r"(?:def|class|function|const|let|var|func|type|fn|struct|enum|trait)\s+"
                        r"(?:\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]{5,})|([A-Za-z_][A-Za-z0-9_]{5,})\s*[:=][^=])",
                        re.MULTILINE)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}")
COMMENT = ("#", "//", "/*", "*", '"""', "'''")  # a comment's words are not code using a name
SPECIFIC = 3  # a name more files define than this is a common word (read, close), not an API


def source_files(root: Path) -> list[Path]:
    """Code files under root, sorted, skipping huge, binary and non-UTF-8 ones."""
    files = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in CODE_SUFFIXES or not path.is_file() or path.is_symlink():
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        files.append(path)
    return files


def _read(path: Path) -> str | None:
    try:
        return decode_text(path.read_bytes())
    except OSError:
        return None


def _near_twin(line: str, above: list[str]) -> bool:
    s = line.strip()
    for other in above:
        o = other.strip()
        if o and o != s and abs(len(o) - len(s)) <= len(s) // 2:
            if difflib.SequenceMatcher(None, s, o, autojunk=False).ratio() >= 0.7:
                return True
    return False


def defined_names(text: str) -> set[str]:
    """Names a file defines, at a line's start (at any depth: methods too)."""
    return {a or b for a, b in DEFINITION.findall(text)}


def eligible_lines(lines: list[str], kind: str, elsewhere: Container[str] = ()) -> Iterator[int]:
    """Indexes of lines that make a case of this kind; `elsewhere`: for crossfile, the names
    other files of the folder define."""
    seen: set[str] = set()
    for i, line in enumerate(lines):
        s = line.strip()
        if kind == "fim":
            if len(s) >= 4:
                yield i
        elif kind == "edit":
            if len(s) >= 10 and s not in (x.strip() for x in lines[max(0, i - 60):i]) \
                    and _near_twin(line, lines[max(0, i - 60):i]):
                yield i
        elif kind == "copy":
            if len(s) >= 20 and any(x.strip() == s for x in lines[max(0, i - 200):i]):
                yield i
        elif kind == "crossfile":
            names = set(NAME.findall(line))
            if len(s) >= 10 and not s.startswith(COMMENT) and any(n in elsewhere and n not in seen for n in names):
                yield i
            seen |= names


def make_case(path: Path, text: str, lines: list[str], i: int, kind: str, case_id: str) -> dict:
    line = lines[i]
    indent = len(line) - len(line.lstrip(" \t"))
    start = sum(len(x) + 1 for x in lines[:i])
    prefix = text[: start + indent]
    middle = line[indent:]
    suffix = text[start + len(line):]
    return {"id": case_id, "path": str(path), "prefix": prefix, "suffix": suffix, "middle": middle, "kind": kind}


def build_workload(root: Path, kind: str, n: int, seed: int) -> list[dict]:
    """n cases of one kind, at most 2 per file, drawn reproducibly with `seed`."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    rng = random.Random(seed)
    files = source_files(root)
    definers = _definers(files) if kind == "crossfile" else {}
    rng.shuffle(files)
    cases: list[dict] = []
    for path in files:
        text = _read(path)
        if text is None:
            continue
        lines = text.split("\n")
        if max(map(len, lines)) > MAX_LINE:
            continue
        elsewhere = {n for n, where in definers.items() if where - {path} and len(where) <= SPECIFIC} \
            - defined_names(text)
        picks = list(eligible_lines(lines, kind, elsewhere))
        for i in rng.sample(picks, min(2, len(picks))):
            cases.append(make_case(path, text, lines, i, kind, f"{kind}-{len(cases):04d}"))
            if len(cases) == n:
                return cases
    return cases


def _definers(files: list[Path]) -> dict[str, set[Path]]:
    """Each defined name and the files that define it."""
    where: dict[str, set[Path]] = defaultdict(set)
    for path in files:
        for name in defined_names(_read(path) or ""):
            where[name].add(path)
    return where


def main(root: str, kind: str, n: int, seed: int, out: str | None) -> int:
    import sys

    cases = build_workload(Path(root), kind, n, seed)
    if not cases:
        print(f"specfill: no {kind} cases found under {root}", file=sys.stderr)
        return 2
    lines = "".join(json.dumps(c) + "\n" for c in cases)
    if out:
        Path(out).write_text(lines)
        print(f"{len(cases)} {kind} cases -> {out}", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    return 0


def load_workload(path: str) -> list[dict]:
    """Cases from a JSONL file; each needs prefix and suffix (id, middle, path, kind optional)."""
    cases = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not JSON: {exc}") from exc
        if not isinstance(case, dict) or not isinstance(case.get("prefix"), str) \
                or not isinstance(case.get("suffix", ""), str):
            raise ValueError(f"{path}:{n}: a case needs string fields prefix and suffix")
        case.setdefault("id", f"case-{n}")
        case.setdefault("path", "file.py")
        case.setdefault("suffix", "")
        case.setdefault("middle", "")
        case.setdefault("kind", "")
        cases.append(case)
    return cases
