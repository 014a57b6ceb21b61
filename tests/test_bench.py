"""`specfill bench` runs every mode side by side and writes the report schema."""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from bench.workload import build_workload

STDLIB = Path(sysconfig.get_paths()["stdlib"]) / "json"


def test_bench_reports_every_mode_and_speculation_is_identical_to_plain(tmp_path):
    work = tmp_path / "copy.jsonl"
    work.write_text("".join(json.dumps(c) + "\n" for c in build_workload(STDLIB, "copy", 2, seed=5)))
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench", "--workload", str(work), "--modes",
                           "plain,anchor,lookup,draft,auto", "--max-tokens", "12", "--prompt-tokens", "256",
                           "--n-ctx", "1024", "--json", str(out)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["n_cases"] == 2 and report["model"].endswith(".gguf")
    assert report["build"]["build"] == "llamafile-off"
    assert set(report["modes"]) == {"plain", "anchor", "lookup", "draft", "auto"}
    for mode, m in report["modes"].items():
        assert set(m) >= {"speedup", "decode_tok_s", "accepted_per_step", "acceptance_rate", "identical",
                          "divergences_unexplained", "ttft_ms", "latency_ms", "peak_rss_mb"}
        assert set(m["ttft_ms"]) == {"p50", "p95"} and set(m["latency_ms"]) == {"p50", "p95", "p99"}
        assert m["decode_tok_s"] > 0 and m["peak_rss_mb"] > 0
        if mode != "anchor":  # equal to plain, or parted from it only at a near-tie (bench.divergence)
            assert m["divergences_unexplained"] == 0
            assert m["replayed"] == 0, "every mode decodes every token: none read off the rows a run before kept"
    assert report["modes"]["plain"]["speedup"] == 1.0
    bound = report["lookup_bound"]
    assert bound["per_position"] >= bound["per_kind"] >= 1.0, "each may draft nothing; per position knows most"
    assert report["draft_bound"] >= 1.0, "the self draft's hindsight bound: drafting nothing is plain"
    assert "speedup" in proc.stdout and "anchor" in proc.stdout
    rows = report["row_cost_steps"]
    assert set(rows) == {"profile", "this_run"} and all(set(v) == {"4", "16"} for v in rows.values())
    assert 0 < rows["profile"]["16"] < 2, "a row past the first costs a share of a plain step, not several"
    assert "a verified row past the first" in proc.stdout


def test_bench_rejects_unknown_mode_and_bad_workload(tmp_path):
    work = tmp_path / "w.jsonl"
    work.write_text('{"prefix": "x = 1\\n", "suffix": ""}\n')
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench", "--workload", str(work), "--modes",
                           "plain,turbo"], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown mode(s) turbo" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench", "--workload", str(tmp_path / "none.jsonl")],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "none.jsonl" in proc.stderr
