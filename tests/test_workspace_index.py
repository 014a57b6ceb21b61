"""The workspace indexer on a real folder tree: what it reads, what it never reads, and
how watchfiles keeps it current."""

import os
import time
from pathlib import Path

import pytest

from lsp_server.session.workspace import WorkspaceIndex


@pytest.fixture
def tree(tmp_path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "geometry.py").write_text("def area_of_square(side):\n    return side ** 2\n")
    (ws / "pkg" / "io_utils.py").write_text("def read_lines(path):\n    return open(path).read()\n")
    (ws / "README.md").write_text("# ws\n")
    (ws / ".gitignore").write_text("secrets.txt\nbuild_out/\n*.log\n!keep.log\n")
    (ws / "secrets.txt").write_text("password = hunter2\n")
    (ws / "build_out").mkdir()
    (ws / "build_out" / "gen.py").write_text("x = 1\n")
    (ws / "debug.log").write_text("noise\n")
    (ws / "keep.log").write_text("kept\n")
    (ws / "pkg" / ".gitignore").write_text("local_only.py\n")
    (ws / "pkg" / "local_only.py").write_text("y = 2\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "dep.js").write_text("module.exports = 1\n")
    (ws / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(100))
    (ws / "huge.py").write_text("z = 0\n" * 100_000)  # 600 KB
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.py").write_text("API_KEY = 'do-not-read'\n")
    os.symlink(outside / "private.py", ws / "link_to_private.py")
    os.symlink(outside, ws / "linked_dir")
    (ws / "pkg" / "inner_link.py").symlink_to(ws / "pkg" / "geometry.py")
    return ws


def names(index: WorkspaceIndex, ws: Path) -> set[str]:
    return {str(p.relative_to(os.path.realpath(ws))) for p in index.files}


def test_reads_text_files_and_skips_ignored_binary_huge_and_vcs(tree):
    index = WorkspaceIndex([tree])
    index.scan()
    assert names(index, tree) == {"pkg/geometry.py", "pkg/io_utils.py", "README.md", ".gitignore", "keep.log",
                                  "pkg/.gitignore", "pkg/inner_link.py"}


def test_never_reads_outside_the_workspace_through_symlinks(tree):
    index = WorkspaceIndex([tree])
    index.scan()
    assert not any("do-not-read" in (index.text(p) or "") for p in index.files)
    index._add(tree / "linked_dir" / "private.py")  # as a watcher event through the link would
    assert not any("do-not-read" in (index.text(p) or "") for p in index.files)
    assert index.related(str(tree / "main.py"), "API_KEY = ", n=2) == []


def test_limits_files_and_bytes(tree):
    index = WorkspaceIndex([tree], max_files=2)
    index.scan()
    assert len(index.files) == 2
    index = WorkspaceIndex([tree], max_total_bytes=60)
    index.scan()
    assert 0 < index.indexed_bytes == sum(len(index.text(p)) for p in index.files) <= 60


def test_related_prefers_files_sharing_identifiers_with_the_cursor(tree):
    index = WorkspaceIndex([tree])
    index.scan()
    best = index.related(str(tree / "main.py"), "total = area_of_square(side) + ", n=1)
    assert [f.path.name for f in best] in (["geometry.py"], ["inner_link.py"])
    assert index.related(str(tree / "main.py"), "nothing in common here", n=2) == []


def test_watch_follows_new_changed_and_deleted_files(tree):
    index = WorkspaceIndex([tree])
    index.start()
    try:
        assert index.ready.wait(10)
        time.sleep(0.5)  # the watcher is up
        (tree / "pkg" / "fresh.py").write_text("def fresh_function():\n    pass\n")
        (tree / "pkg" / "io_utils.py").unlink()
        (tree / "ignored.log").write_text("not indexed\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = names(index, tree)
            if "pkg/fresh.py" in got and "pkg/io_utils.py" not in got:
                break
            time.sleep(0.1)
        assert "pkg/fresh.py" in got and "pkg/io_utils.py" not in got
        assert "ignored.log" not in got
    finally:
        index.stop()


def test_related_prefers_the_same_extension_then_more_shared_identifiers(tmp_path):
    (tmp_path / "a.js").write_text("render_widget(frame_count, pixel_ratio, layout_tree)\n")
    (tmp_path / "b.py").write_text("render_widget(frame_count)\n")
    (tmp_path / "c.py").write_text("render_widget(frame_count, pixel_ratio)\n")
    index = WorkspaceIndex([tmp_path])
    index.scan()
    near = "render_widget(frame_count, pixel_ratio, layout_tree)"
    assert [f.path.name for f in index.related(str(tmp_path / "main.py"), near, n=3)] == ["c.py", "b.py", "a.js"]
    assert [f.path.name for f in index.related(str(tmp_path / "main.js"), near, n=3)] == ["a.js", "c.py", "b.py"]
    # never the file itself, nor the excluded (open) ones
    assert [f.path.name for f in index.related(str(tmp_path / "c.py"), near, n=3, exclude=[str(tmp_path / "b.py")])] \
        == ["a.js"]


def test_related_passes_over_files_kept_out_and_takes_the_next(tmp_path):
    (tmp_path / "secrets.py").write_text("render_widget(frame_count, pixel_ratio, layout_tree)\n")
    (tmp_path / "b.py").write_text("render_widget(frame_count)\n")
    (tmp_path / "c.py").write_text("render_widget(frame_count, pixel_ratio)\n")
    index = WorkspaceIndex([tmp_path])
    index.scan()
    read = []
    index.text = lambda path: read.append(path.name) or path.read_text()  # type: ignore[method-assign]
    near = "render_widget(frame_count, pixel_ratio, layout_tree)"
    got = index.related(str(tmp_path / "main.py"), near, n=2, skip=lambda p: "secret" in p)
    assert [f.path.name for f in got] == ["c.py", "b.py"]
    assert "secrets.py" not in read  # its text is never read


def test_a_changed_or_deleted_file_is_scored_and_read_as_it_is_now(tmp_path):
    (tmp_path / "old.py").write_text("def shared_helper_name(alpha_value):\n    return alpha_value\n")
    (tmp_path / "other.py").write_text("shared_helper_name = None\n")
    index = WorkspaceIndex([tmp_path])
    index.scan()
    near = "x = shared_helper_name(alpha_value)"
    assert index.related("/elsewhere/main.py", near, n=1)[0].path.name == "old.py"
    # changed on disk: the text given is the new one, even before the watcher re-indexes it
    (tmp_path / "old.py").write_text("def shared_helper_name(alpha_value):\n    return alpha_value * 2\n")
    assert index.related("/elsewhere/main.py", near, n=1)[0].text.endswith("alpha_value * 2\n")
    # re-indexed with other words: it no longer shares them, and counts once, not twice
    (tmp_path / "old.py").write_text("def unrelated_thing():\n    pass\n")
    index._add(tmp_path / "old.py")
    assert [f.path.name for f in index.related("/elsewhere/main.py", near, n=2)] == ["other.py"]
    assert index.related("/elsewhere/main.py", "unrelated_thing()", n=2)[0].path.name == "old.py"
    # deleted before the watcher saw it: passed over; then removed, its words are gone too
    (tmp_path / "other.py").unlink()
    assert index.related("/elsewhere/main.py", near, n=2) == []
    index._remove(tmp_path / "other.py")
    index._remove(tmp_path / "old.py")
    assert index.files == {} and index.indexed_bytes == 0
    assert index.related("/elsewhere/main.py", "unrelated_thing()", n=2) == []
    (tmp_path / "new.py").write_text("def shared_helper_name():\n    pass\n")
    index._add(tmp_path / "new.py")
    assert [f.path.name for f in index.related("/elsewhere/main.py", near, n=2)] == ["new.py"]


def test_a_started_index_finds_files_the_watcher_adds(tree):
    index = WorkspaceIndex([tree])
    index.start()
    try:
        assert index.ready.wait(10)
        near = "total = area_of_square(side) + fresh_volume_of_cube(side)"
        assert [f.path.name for f in index.related(str(tree / "main.py"), near, n=1)] in (["geometry.py"],
                                                                                          ["inner_link.py"])
        time.sleep(0.5)  # the watcher is up
        (tree / "pkg" / "solids.py").write_text("def fresh_volume_of_cube(side):\n    return side ** 3\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the indexer's thread builds the table, not the request
            found = [f.path.name for f in index.related(str(tree / "main.py"), "fresh_volume_of_cube(", n=1)]
            if found:
                break
            time.sleep(0.1)
        assert found == ["solids.py"]
        assert index.related(str(tree / "main.py"), "fresh_volume_of_cube(", n=1)[0].text.startswith("def fresh")
    finally:
        index.stop()
