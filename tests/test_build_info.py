"""The project's own install is the batch-invariant build, and it is detected at run time."""

from speculative.build_info import build_info


def test_loaded_build_is_llamafile_off():
    info = build_info()
    assert info["llamafile_sgemm"] is False
    assert info["build"] == "llamafile-off" and info["batch_invariant"] is True
