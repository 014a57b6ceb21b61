"""The ring buffer of chunks from recently edited documents."""

from lsp_server.session.chunks import ChunkRing

CODE = "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(40))


def test_a_chunk_is_the_window_around_the_edit():
    ring = ChunkRing(lines=8)
    chunk = ring.add("a.py", CODE, 30)
    lines = CODE.split("\n")
    assert chunk.start == 26 and chunk.text == "\n".join(lines[26:34])


def test_editing_the_same_place_keeps_one_chunk():
    ring = ChunkRing(lines=32)
    ring.add("a.py", CODE, 30)
    ring.add("a.py", CODE, 31)  # one line further: nearly the same lines
    edited = CODE.replace("return x + 10", "return x * 10")
    ring.add("a.py", edited, 30)
    assert len(ring) == 1
    assert "x * 10" in ring.recent()[0].text


def test_distinct_places_fill_the_ring_up_to_its_capacity_oldest_out():
    ring = ChunkRing(capacity=3, lines=8)
    for line in (4, 30, 60, 90):
        ring.add("a.py", CODE, line)
    assert len(ring) == 3
    assert [c.start for c in ring.recent()] == [86, 56, 26]  # newest first; the one at line 0 is gone


def test_recent_skips_the_current_document_and_blank_windows():
    ring = ChunkRing(lines=4)
    ring.add("a.py", CODE, 10)
    ring.add("b.py", CODE, 50)
    assert ring.add("c.py", "\n\n\n   \n", 1) is None
    assert [c.path for c in ring.recent(exclude_path="b.py")] == ["a.py"]
