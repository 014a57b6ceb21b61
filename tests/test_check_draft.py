"""`specfill check --draft-model`: the pair a user sets (model.path, model.draftPath) checked
before the server loads it: a draft of another vocabulary is a clear error; a good one is shown
with its step measured against the target's."""

import json
import subprocess
import sys

from bench import regime


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server", "check", *args], check=False, capture_output=True,
                          text=True, timeout=600)


def test_a_draft_with_another_vocabulary_is_refused_by_name(gemma_path):
    proc = check("--draft-model", str(gemma_path))
    assert proc.returncode == 2
    assert "another vocabulary" in proc.stderr and gemma_path.name in proc.stderr


def test_a_truncated_draft_is_shown_with_its_step_against_the_targets():
    draft = regime.truncated(10, regime._source())
    proc = check("--draft-model", str(draft), "--costs", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["draft_model"] == str(draft)
    # A third of the layers, the same head: its step costs less than the whole model's.
    assert 0 < info["draft_step_of_target"] < 1
