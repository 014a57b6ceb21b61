"""The shared server: one process per user and build, one LSP session per editor connection,
one model worker for every session that asks for the same model (lsp_server/engine_pool.py).

Editors reach it through `specfill attach` (lsp_server/attach.py), which starts it when none
answers. It listens on a Unix socket in the user's private folder (0700; the socket 0600) and
also refuses any connection whose peer is another user. `shutdown`/`exit` end one session; the
server exits once no session has been open for its idle time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import threading
import time
from pathlib import Path

from pygls.io_ import run_async

from lsp_server import __version__
from lsp_server.backends.worker_pool import WorkerPool
from lsp_server.session.logs import FORMAT, SESSION, add_file
from lsp_server.session.server import SpecfillServer, create_server
from lsp_server.shared.attach import address

log = logging.getLogger("specfill")
IDLE_CHECK_S = 1.0


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


class Daemon:
    def __init__(self, path: Path, idle_exit_s: float) -> None:
        self.path = path
        self.idle_exit_s = idle_exit_s
        self.pool = WorkerPool(shared=True)
        self.connections = 0
        self.last_session_end = time.monotonic()
        self._numbers = 0
        self.inode = 0  # of the socket this server made; another server may replace it later

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else -1
        if uid != os.getuid():
            log.warning("refused a connection from uid %d: the shared server serves only uid %d", uid, os.getuid())
            writer.close()
            return
        self._numbers += 1
        number = self._numbers
        ls = create_server(self.pool)
        SESSION.set(ls)  # this task's and its children's log records are this session's
        stop = threading.Event()
        ls.protocol.set_writer(writer)  # type: ignore[arg-type]  # StreamWriter.write is what pygls calls
        ls.protocol.on_exit = stop.set  # type: ignore[attr-defined]
        self.connections += 1
        log.info("session %d opened (%d open)", number, self.connections)
        try:
            await run_async(stop_event=stop, reader=reader, protocol=ls.protocol,
                            error_handler=ls.report_server_error)  # pygls logs to its own logger
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("session %d: connection lost: %s", number, exc)
        finally:
            self._end(ls, number)
            with contextlib.suppress(Exception):
                writer.close()

    def _end(self, ls: SpecfillServer, number: int) -> None:
        ls.end()
        self.connections -= 1
        self.last_session_end = time.monotonic()
        log.info("session %d closed (%d open)", number, self.connections)

    async def serve(self) -> None:
        server = await asyncio.start_unix_server(self._session, path=address(self.path))
        os.chmod(self.path, 0o600)
        self.inode = os.stat(self.path).st_ino
        log.info("shared server %s listening on %s (pid %d, exits %.0f s after its last session)",
                 __version__, self.path, os.getpid(), self.idle_exit_s)
        async with server:
            while self.connections or time.monotonic() - self.last_session_end < self.idle_exit_s:
                await asyncio.sleep(IDLE_CHECK_S)
            log.info("no session for %.0f s: exiting", self.idle_exit_s)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # an editor starting from now on starts another server
            self.inode = 0
        for worker, _ in self.pool.workers():
            worker.shutdown()


def main(path: str, idle_exit_s: float) -> int:
    handler = logging.StreamHandler()  # attach points stdout and stderr at the log file
    handler.setFormatter(logging.Formatter(FORMAT))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    if os.environ.get("SPECFILL_LOG_FILE"):  # as `serve --log-file` (the first editor's environment)
        add_file(os.environ["SPECFILL_LOG_FILE"])
    daemon = Daemon(Path(path).absolute(), idle_exit_s)
    try:
        asyncio.run(daemon.serve())
    finally:
        with contextlib.suppress(FileNotFoundError):
            if os.stat(daemon.path).st_ino == daemon.inode:
                os.unlink(daemon.path)
    return 0
