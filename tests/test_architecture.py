"""The layers ARCHITECTURE.md states, read from the code's own imports (every import, also
inside functions and under TYPE_CHECKING): the runtime never imports bench, each subsystem
imports only the layers below it, and no modules import each other in a circle."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
from import_graph import cycles, graph, imports, without_init_reexports  # noqa: E402

RUNTIME = ("lsp_server", "speculative", "prompts")
LEAVES = ("bench", "lsp_server.session", "lsp_server.backends", "lsp_server.shared", "lsp_server.cli")
# A module's package (or module) prefix -> the project packages it must never import.
FORBIDDEN = {
    "lsp_server.backends": ("bench", "lsp_server.session", "lsp_server.shared", "lsp_server.cli"),
    "lsp_server.session": ("bench", "lsp_server.shared", "lsp_server.cli"),
    "lsp_server.shared": ("bench", "lsp_server.cli"),
    "lsp_server": ("bench",),
    # The model list and downloads: the backends find pulled files through it, it knows no subsystem.
    "lsp_server.models": LEAVES,
    # The pure modules at lsp_server's top: every subsystem imports them, they import none.
    **{f"lsp_server.{m}": LEAVES for m in ("settings", "schema_export", "postprocess", "words")},
    "speculative": ("bench", "lsp_server", "prompts"),
    "prompts": ("bench", "lsp_server", "speculative"),
}


def forbidden_for(module: str) -> tuple[str, ...]:
    owner = max((k for k in FORBIDDEN if module == k or module.startswith(k + ".")), key=len, default=None)
    return FORBIDDEN[owner] if owner else ()


def wrong_imports(deps: dict[str, set[str]]) -> list[str]:
    return [f"{m} imports {i}" for m, ds in deps.items() if m.split(".")[0] in RUNTIME
            for i in sorted(ds) if any(i == f or i.startswith(f + ".") for f in forbidden_for(m))]


def test_the_runtime_never_imports_bench_and_each_layer_only_those_below():
    assert wrong_imports(graph()) == []


def test_a_runtime_import_of_bench_is_caught(tmp_path):
    """The check itself: a runtime module importing bench, or a backend a session, fails it."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from bench.decoding import run\n")
    deps = {"lsp_server.backends.local": imports(bad), "lsp_server.backends.worker": {"lsp_server.session.server"},
            "bench.lsp": {"lsp_server.session.server"}}
    assert wrong_imports(deps) == ["lsp_server.backends.local imports bench.decoding",
                                   "lsp_server.backends.worker imports lsp_server.session.server"]


def test_no_modules_import_each_other_in_a_circle():
    assert cycles(without_init_reexports(graph())) == []


@pytest.mark.parametrize("deps,want", [({"a": {"b"}, "b": {"a"}}, [["a", "b"]]), ({"a": {"b"}, "b": set()}, [])])
def test_the_circle_finder_finds_circles(deps, want):
    assert cycles(deps) == want
