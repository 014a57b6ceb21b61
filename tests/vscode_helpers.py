"""A real VS Code for the editor tests (`bench.code_server`): stopping it stops the shared
servers of its runtime folder too."""

from __future__ import annotations

from bench import code_server
from tests.shared_helpers import kill_shared_servers


class CodeServer(code_server.CodeServer):
    def stop(self) -> None:
        super().stop()
        kill_shared_servers(self.runtime)  # it outlives the window by server.idleMinutes
