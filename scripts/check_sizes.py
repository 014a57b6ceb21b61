"""The size limits `make lint` keeps: a class at most 220 lines, a function at most 50, in the
runtime packages (bench's measuring loops are exempt, as in ruff's rules)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CLASS_LINES, FUNCTION_LINES = 220, 50
PACKAGES = ("lsp_server", "speculative", "prompts")


def too_big(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        limit = (CLASS_LINES if isinstance(node, ast.ClassDef) else
                 FUNCTION_LINES if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None)
        if limit is None:
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        lines = (node.end_lineno or node.lineno) - first + 1
        if lines > limit:
            out.append(f"{path}:{node.lineno}: {node.name} has {lines} lines (limit {limit})")
    return out


def main(root: Path) -> int:
    found = [msg for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py")) for msg in too_big(p)]
    print("\n".join(found) or "sizes: every class and function within the limits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")))
