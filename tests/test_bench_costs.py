"""`specfill bench-costs` measures each model's reading, step and verify costs and sets them side by side."""

import json
import subprocess
import sys

from bench.costs import DEPTHS, VERIFY_ROWS, table


def test_bench_costs_measures_every_figure_of_each_model_and_their_ratio(tmp_path):
    out = tmp_path / "costs.json"
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench-costs", "--model", "smollm2-135m",
                           "--model", "trunc:12", "--runs", "1", "--json", str(out)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())
    assert [r["model"] for r in rows] == ["smollm2-135m", "trunc:12"]
    kinds = ("read_tok_s", "step_ms", *(f"verify{k}_ms" for k in VERIFY_ROWS))
    figures = [f"{kind}@{d}" for d in DEPTHS for kind in kinds]
    for r in rows:
        assert all(r[f] > 0 for f in figures), r
    assert rows[1]["mib"] < rows[0]["mib"], "12 of 30 layers weigh less"
    assert "| step_ms@1024 |" in proc.stdout and "trunc:12 / smollm2-135m" in proc.stdout


def test_the_table_sets_each_figure_over_the_first_models():
    rows = [{"model": "a", "file": "a.gguf", "mib": 100.0, "step_ms@128": 10.0},
            {"model": "b", "file": "b.gguf", "mib": 250.0, "step_ms@128": 13.0}]
    lines = table(rows).splitlines()
    assert lines[0] == "| figure | a | b | b / a |"
    assert lines[2] == "| mib | 100.0 | 250.0 | 2.50 |" and lines[3] == "| step_ms@128 | 10.0 | 13.0 | 1.30 |"
