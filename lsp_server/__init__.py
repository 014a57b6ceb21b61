"""specfill's language server, in three subsystems, each a package (ARCHITECTURE.md):
`shared` (the daemon every editor window reaches) -> `session` (one editor's LSP session) ->
`backends` (what answers: the local model, a remote engine) -> `prompts`, `speculative`.
The modules at this level are the command line (`cli`) and pure leaves every subsystem may
import: `settings` (the one schema) and `schema_export`, `postprocess`, `words`."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specfill")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
