"""`specfill workload`: cases cut from real files, each kind with its defining property."""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bench.workload import build_workload, load_workload

STDLIB = Path(sysconfig.get_paths()["stdlib"]) / "json"


@pytest.mark.parametrize("kind", ["fim", "edit", "copy"])
def test_cases_reassemble_their_file_and_have_the_kinds_property(kind):
    cases = build_workload(STDLIB, kind, 6, seed=3)
    assert cases
    for case in cases:
        text = Path(case["path"]).read_text()
        assert case["prefix"] + case["middle"] + case["suffix"] == text
        line_start = case["prefix"].rfind("\n") + 1
        assert case["prefix"][line_start:].strip() == ""  # the cursor sits after the indentation
        assert case["middle"] and not case["middle"][0].isspace()
        above = case["prefix"].split("\n")[:-1]
        if kind == "copy":
            assert len(case["middle"].strip()) >= 20
            assert case["middle"].strip() in [ln.strip() for ln in above[-200:]]
        if kind == "edit":
            assert case["middle"].strip() not in [ln.strip() for ln in above[-60:]]


def test_a_crossfile_case_uses_a_name_only_another_file_of_the_folder_defines(tmp_path):
    (tmp_path / "shapes.py").write_text("class Rectangle:\n    pass\n\n\ndef area_of(shape):\n    return 0\n")
    (tmp_path / "main.py").write_text(
        "import shapes\n\n\ndef main():\n    total = 0\n    box = shapes.Rectangle()\n"
        "    total += shapes.area_of(box)\n    return total + 1000\n\n\ndef helper_local():\n    return main()\n"
        "\n\nvalue = helper_local()\n")
    cases = build_workload(tmp_path, "crossfile", 10, seed=1)
    # Rectangle's line, then area_of's line (Rectangle and box are known by then); never a
    # line whose names its own file defines (helper_local) or no file defines (total)
    assert sorted(c["middle"] for c in cases) == ["box = shapes.Rectangle()", "total += shapes.area_of(box)"]
    assert all(Path(c["path"]).name == "main.py" for c in cases)


def test_same_seed_same_cases_and_binary_files_skipped(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n" * 5 + "def f():\n    return 1\n")
    (tmp_path / "b.py").write_bytes(b"\x00\x01 binary \x00" * 10)
    (tmp_path / "c.py").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    first = build_workload(tmp_path, "fim", 4, seed=1)
    assert first == build_workload(tmp_path, "fim", 4, seed=1)
    assert {Path(c["path"]).name for c in first} == {"a.py"}


def test_a_minified_file_gives_no_cases(tmp_path):
    (tmp_path / "app.js").write_text("const a = 1\nconst b = 2\n")
    (tmp_path / "app.min.js").write_text('"use strict";' + "var x=1;" * 200 + "\n//# sourceMappingURL=app.min.js.map\n")
    cases = build_workload(tmp_path, "fim", 4, seed=1)
    assert cases and {Path(c["path"]).name for c in cases} == {"app.js"}


def test_cli_writes_jsonl_with_the_schema(tmp_path):
    out = tmp_path / "w.jsonl"
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "workload", "--from", str(STDLIB), "--kind", "copy",
                           "--n", "3", "--seed", "2", "--out", str(out)],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3
    assert all(set(r) == {"id", "path", "prefix", "suffix", "middle", "kind"} for r in rows)
    assert load_workload(str(out)) == rows


def test_load_rejects_bad_lines_with_the_line_number(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prefix": "a", "suffix": ""}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not JSON"):
        load_workload(str(bad))
    bad.write_text('{"suffix": ""}\n')
    with pytest.raises(ValueError, match="needs string fields prefix"):
        load_workload(str(bad))
