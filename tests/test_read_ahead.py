"""The read-ahead schedule: one pending prompt, read while idle, yielding at once to a request
submitted and not started, to the cursor moving elsewhere, and to a shutdown."""

from lsp_server.backends.read_ahead import ReadAhead


def test_a_read_yields_to_a_request_until_the_request_starts():
    s = ReadAhead()
    flag = s.read_cancel()
    assert not flag.is_set()
    s.submit()
    assert flag.is_set()
    s.start()
    assert not flag.is_set()


def test_a_read_of_a_place_stops_when_the_cursor_moves_elsewhere():
    s = ReadAhead()
    here = s.read_cancel(s.moved())
    assert not here.is_set()
    elsewhere = s.read_cancel(s.moved())
    assert here.is_set() and not elsewhere.is_set()


def test_one_read_is_queued_for_the_pending_prompt_and_done_clears_it():
    s = ReadAhead()
    assert not s.take()  # nothing pending
    s.want([1, 2, 3])
    assert s.take() and not s.take()  # queued once
    assert s.begin() == [1, 2, 3] and s.take()  # begun: a later one may be queued again
    s.want(None)
    assert s.pending is None and not s.take()


def test_shutting_down_stops_every_read():
    s = ReadAhead()
    flag = s.read_cancel()
    s.closing.set()
    assert flag.is_set()
