"""`specfill bench-lsp` types cases into the real server and reports latency and usefulness."""

import json
import subprocess
import sys
from pathlib import Path

from bench.lsp import continues, without_cases


def test_continues_judges_the_first_line_against_what_is_typed_next():
    assert continues("side ** 2", "side ** 2")
    assert continues("side", "side ** 2")  # a shorter suggestion that is right so far
    assert continues("side ** 2\nreturn", "side ** 2")
    assert not continues("radius", "side ** 2")
    assert not continues("  ", "side")


def test_bench_lsp_reports_the_schema_with_no_errors(tmp_path):
    work = tmp_path / "w.jsonl"
    case = {"id": "c1", "path": "shapes.py", "kind": "fim", "middle": "side ** 2",
            "prefix": "import math\n\n\ndef area_of_square(side):\n    return ", "suffix": "\n"}
    work.write_text(json.dumps(case) + "\n")
    out = tmp_path / "r.json"
    ws = tmp_path / "ws"  # a workspace folder, as an editor opens the server on
    ws.mkdir()
    (ws / "geometry.py").write_text("def area_of_square(side):\n    return side ** 2\n")
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench-lsp", "--workload", str(work), "--key-ms", "60",
                           "--json", str(out), "--workspace", str(ws)], check=False, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert set(report["latency_ms"]) == {"p50", "p95", "p99"}
    assert report["keystrokes"] == len(case["middle"]) and report["answered"] == report["keystrokes"]
    assert report["errors"] == 0
    assert report["workspace"] == str(ws) and report["workspace_files"] == 1  # indexed before typing began
    assert "1 workspace files indexed" in proc.stdout
    assert 0 <= report["cache_hit_rate"] <= 1 and 0 <= report["useful"] <= 1
    assert report["server"]["build"] == "llamafile-off"
    first = report["first_suggestion_ms"]
    assert len(first["texts"]) == len(first["cases"]) == 1
    assert first["one_char"] == sum(len(t.strip()) == 1 for t in first["texts"])
    assert bool(first["texts"][0].strip()) == (first["never"] == 0)


def test_a_workspace_holding_the_cases_files_is_opened_as_a_copy_without_them(tmp_path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "typed.py").write_text("x = 1\n")
    (ws / "pkg" / "other.py").write_text("y = 2\n")
    with without_cases(str(ws), [{"path": str(ws / "pkg" / "typed.py")}]) as (folder, left_out):
        assert left_out == 1 and folder != str(ws)
        assert sorted(p.name for p in Path(folder).rglob("*.py")) == ["other.py"]
    with without_cases(str(ws), [{"path": "elsewhere.py"}]) as (folder, left_out):
        assert (folder, left_out) == (str(ws), 0)
