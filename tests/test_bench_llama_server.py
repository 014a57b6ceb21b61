"""`specfill bench-llama-server`: llama.cpp's own speculation on the prompts `specfill bench` uses."""

import json
import subprocess
import sys

import pytest

from tests.lsp_helpers import REPEATED

pytestmark = pytest.mark.remote


def test_llama_server_decodes_the_cases_plain_with_a_draft_and_with_ngrams(tmp_path):
    """On a text certain by construction (REPEATED), with the embedded model as its own draft:
    the draft drafts and is taken, and every mode writes plain's text."""
    work = tmp_path / "repeated.jsonl"
    work.write_text(json.dumps({"id": "r", "path": "r.py", "prefix": REPEATED, "suffix": "", "middle": "1, "}) + "\n")
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench-llama-server", "--workload", str(work),
                           "--draft-model", "smollm2-135m", "--max-tokens", "24", "--prompt-tokens", "512",
                           "--json", str(out)], check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["cases"] == 1 and set(report["modes"]) == {"plain", "draft", "ngram-mod"}
    plain = report["modes"]["plain"]
    assert plain["tokens"] == 23 and plain["tok_s"] > 0
    draft = report["modes"]["draft"]
    assert draft["drafted"] > 0 and draft["accepted"] > 0
    assert all(m["texts"] == plain["texts"] for m in report["modes"].values())
    assert "CPU flags" in proc.stdout and "ngram-mod" in proc.stdout


def test_a_missing_draft_model_is_a_clear_error(tmp_path):
    work = tmp_path / "w.jsonl"
    work.write_text(json.dumps({"id": "r", "path": "r.py", "prefix": "x = 1\n", "suffix": "", "middle": ""}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "bench-llama-server", "--workload", str(work),
                           "--draft-model", str(tmp_path / "none.gguf")], check=False, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "none.gguf" in proc.stderr
