"""The project's import graph, read from its code: every import of a project module (also
inside functions and under TYPE_CHECKING). `python scripts/import_graph.py` prints it by
package, as ARCHITECTURE.md draws it; tests/test_architecture.py checks its rules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
PROJECT = ("lsp_server", "speculative", "prompts", "bench")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The project modules `path` imports (a `from package import name` counts as package.name
    when that is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}")}
    return {m for m in found if m.split(".")[0] in PROJECT}


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    files = [p for pkg in PROJECT for p in (ROOT / pkg).rglob("*.py")]
    mods = {module_name(p): p for p in files}
    return {m: {i for i in imports(p) if i in mods and i != m} for m, p in mods.items()}


def cycles(deps: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of imports once (Tarjan's strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in deps.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def without_init_reexports(deps: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ re-exporting its own modules is not a circle of the code's own."""
    return {m: {d for d in ds if not (m.startswith(d + ".") and (ROOT / d.replace(".", "/") / "__init__.py").exists())}
            for m, ds in deps.items()}


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "lsp_server" and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0] if parts[0] != "lsp_server" else module


def main() -> int:
    edges: dict[str, set[str]] = {}
    for m, deps in graph().items():
        edges.setdefault(package_of(m), set()).update(package_of(d) for d in deps if package_of(d) != package_of(m))
    for pkg in sorted(edges):
        print(f"{pkg} -> {', '.join(sorted(edges[pkg])) or '(nothing of the project)'}")
    circles = cycles(without_init_reexports(graph()))
    print("circles: " + ("; ".join(" <-> ".join(c) for c in circles) if circles else "none"))
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
