"""Model workers shared by the sessions that ask for the same model and options.

`specfill serve` has one session; the shared server (lsp_server/shared/daemon.py) has one per editor
connection, and they meet here: a session asking for a model another already loaded gets that
worker (one model in memory, one thread ordering all their work); one asking for another model
gets its own, loaded once and unloaded when its last session lets go.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_server.backends.worker import ModelWorker
from lsp_server.settings import Settings

log = logging.getLogger("specfill")


def rss_mb() -> float:
    """This process's resident memory (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class _Shared:
    worker: ModelWorker
    loading: Future[str]
    users: set[object] = field(default_factory=set)


class WorkerPool:
    def __init__(self, shared: bool = False) -> None:
        self.shared = shared  # the shared server's: sessions of several editors
        self.sessions: set[Any] = set()  # every session open (SpecfillServer), initialized or not
        self._shared: dict[tuple, _Shared] = {}

    def take(self, session: object, settings: Settings) -> tuple[ModelWorker, Future[str]]:
        """The worker for the session's settings and its load (done when it was loaded
        before); the worker the session used until now is let go."""
        key = ModelWorker.key(settings)
        self.release(session, keep=key)
        shared = self._shared.get(key)
        if shared is None:
            worker = ModelWorker()
            shared = self._shared[key] = _Shared(worker, worker.load(settings))
        elif shared.loading.done() and shared.worker.state == "error":
            shared.loading = shared.worker.load(settings)  # a new session tries a failed load again
        if session not in shared.users:
            shared.users.add(session)
            if len(shared.users) > 1:
                log.info("sharing the model loaded for %d sessions", len(shared.users))
        return shared.worker, shared.loading

    def release(self, session: object, keep: tuple | None = None) -> None:
        """The session no longer uses its worker (but for the one under `keep`); a worker
        nobody uses is shut down, freeing its model."""
        for key, shared in list(self._shared.items()):
            if key == keep or session not in shared.users:
                continue
            shared.users.discard(session)
            if not shared.users:
                del self._shared[key]
                log.info("unloading %s: no session uses it", shared.worker.loaded or "a model")
                shared.worker.stop()
                # Waiting for the model thread to finish its step would hold up every session.
                threading.Thread(target=shared.worker.shutdown, name="specfill-unload", daemon=True).start()

    def workers(self) -> list[tuple[ModelWorker, int]]:
        """Each loaded worker with the number of sessions using it."""
        return [(s.worker, len(s.users)) for s in self._shared.values()]

    def status(self, version: str, build: str) -> dict:
        """The shared server's pid, build, sessions (editor, folders) and models loaded
        (`specfill/sharedStatus`, which `specfill status` asks)."""
        sessions = [s for s in self.sessions if s.client_name]  # a status request's own connection is none
        return {
            "pid": os.getpid(), "version": version, "build": build, "shared": self.shared,
            "rss_mb": round(rss_mb(), 1),
            "sessions": [{"editor": s.client_name, "folders": s.workspace_roots(), "since": s.started}
                         for s in sorted(sessions, key=lambda s: s.started)],
            "models": [{"model": w.loaded or "(loading)", "state": w.state, "sessions": n} for w, n in self.workers()],
        }
