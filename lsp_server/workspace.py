"""The workspace indexer: text of the workspace's files for prompt context and prompt lookup.

Reads only regular text files inside the workspace folders: .gitignore'd paths, VCS and
dependency folders, binary files, files over a size limit and anything a symlink leads out of
the workspace are skipped. watchfiles keeps it current. Bounded: files and total bytes.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pathspec

log = logging.getLogger("specfill")

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
             ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", ".tools"}
MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 5000
MAX_TOTAL_BYTES = 16 * 1024 * 1024
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(frozen=True)
class IndexedFile:
    path: Path
    text: str
    words: frozenset[str]


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def decode_text(data: bytes) -> str | None:
    """The text of a file's bytes, or None for a binary (a NUL byte early on) or non-UTF-8 file."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def read_text_file(path: Path, roots: list[Path], max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """The file's text, or None when it is not a regular text file of the workspace within
    the size limit (a symlink is followed only when its target stays inside)."""
    try:
        real = Path(os.path.realpath(path))
        if not _inside(real, roots) or not real.is_file():
            return None
        if real.stat().st_size > max_bytes:
            return None
        data = real.read_bytes()
    except OSError:
        return None
    return decode_text(data)


class Ignore:
    """.gitignore rules of a tree: each folder's file applies below that folder."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        if folder not in self._specs:
            try:
                lines = (folder / ".gitignore").read_text(errors="replace").splitlines()
                self._specs[folder] = pathspec.GitIgnoreSpec.from_lines(lines)
            except OSError:
                self._specs[folder] = None
        return self._specs[folder]

    def forget(self, folder: Path) -> None:
        self._specs.pop(folder, None)

    def ignored(self, path: Path, is_dir: bool = False) -> bool:
        if path.name in SKIP_DIRS and is_dir:
            return True
        root = next((r for r in self.roots if path.is_relative_to(r)), None)
        if root is None:
            return True
        rel_parts = path.relative_to(root).parts
        if any(p in SKIP_DIRS for p in rel_parts[:-1]):
            return True
        folder = root
        for i in range(len(rel_parts)):
            spec = self._spec(folder)
            if spec is not None:
                rel = "/".join(rel_parts[i:]) + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
            folder = folder / rel_parts[i]
        return False


class WorkspaceIndex:
    def __init__(self, roots: Iterable[str | Path], max_file_bytes: int = MAX_FILE_BYTES,
                 max_files: int = MAX_FILES, max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.max_file_bytes, self.max_files, self.max_total_bytes = max_file_bytes, max_files, max_total_bytes
        self.ignore = Ignore(self.roots)
        self.files: dict[Path, IndexedFile] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()

    # -- contents -------------------------------------------------------------------
    def _add(self, path: Path) -> None:
        if self.ignore.ignored(path):
            return
        text = read_text_file(path, self.roots, self.max_file_bytes)
        with self._lock:
            old = self.files.pop(path, None)
            if old is not None:
                self._bytes -= len(old.text)
            if text is None or len(self.files) >= self.max_files or self._bytes + len(text) > self.max_total_bytes:
                return
            self.files[path] = IndexedFile(path, text, frozenset(_WORD.findall(text)))
            self._bytes += len(text)

    def _remove(self, path: Path) -> None:
        with self._lock:
            for p in [p for p in self.files if p == path or p.is_relative_to(path)]:
                self._bytes -= len(self.files.pop(p).text)

    def scan(self) -> None:
        """Read every eligible file under the roots (directory symlinks are not followed)."""
        for root in self.roots:
            for folder, dirs, names in os.walk(root, followlinks=False):
                if self._stop.is_set():
                    return
                base = Path(folder)
                dirs[:] = sorted(d for d in dirs if not self.ignore.ignored(base / d, is_dir=True))
                for name in sorted(names):
                    if len(self.files) >= self.max_files:
                        return
                    self._add(base / name)

    def related(self, path: str, near: str, n: int = 2, exclude: Iterable[str] = ()) -> list[IndexedFile]:
        """The `n` files most like the text `near` the cursor (shared identifiers), same
        extension first; never `path` itself or the `exclude`d (open) ones."""
        words = set(_WORD.findall(near))
        skip = {Path(os.path.realpath(p)) for p in (path, *exclude) if p}
        ext = Path(path).suffix
        with self._lock:
            candidates = [f for p, f in self.files.items() if p not in skip]
        scored = [((f.path.suffix == ext), len(words & f.words), f) for f in candidates]
        scored = [s for s in scored if s[1] > 0]
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [f for _, _, f in scored[:n]]

    # -- lifetime -------------------------------------------------------------------
    def start(self) -> None:
        """Scan, then watch for changes, on a background thread."""
        self._thread = threading.Thread(target=self._run, name="specfill-workspace", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.scan()
        finally:
            self.ready.set()
        try:
            from watchfiles import Change, watch

            for changes in watch(*self.roots, stop_event=self._stop, recursive=True, raise_interrupt=False,
                                 debounce=200, rust_timeout=500, yield_on_timeout=False):
                for change, raw in changes:
                    path = Path(raw)
                    if path.name == ".gitignore":
                        self.ignore.forget(path.parent)
                    if change == Change.deleted:
                        self._remove(path)
                    elif path.is_file():
                        self._add(path)
        except Exception as exc:  # a watcher that cannot start leaves the scanned index
            log.warning("workspace watcher stopped: %s", exc)

    def stop(self) -> None:
        self._stop.set()
