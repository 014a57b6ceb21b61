"""The workspace indexer: which workspace files share identifiers with the text at the
cursor, and their text, for prompt context and prompt lookup.

Reads only regular text files inside the workspace folders: .gitignore'd paths, VCS and
dependency folders, binary files, files over a size limit and anything a symlink leads out of
the workspace are skipped. watchfiles keeps it current. Bounded: files and total bytes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pathspec

from lsp_server.words import IDENTIFIER

log = logging.getLogger("specfill")

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
             ".pytest_cache", ".ruff_cache", ".tox", "dist", "build", ".tools"}
MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 5000
MAX_TOTAL_BYTES = 16 * 1024 * 1024
REBUILD_EVERY = 500  # files indexed during a scan between two builds of the lookup table
MIN_IDENTIFIER = 3  # shorter names (i, x, df) say nothing about which files are related


@dataclass(frozen=True)
class IndexedFile:
    path: Path
    text: str


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


@dataclass(frozen=True)
class _Table:
    """Every indexed (identifier hash, file) pair, sorted by hash: an inverted index in three
    arrays, built anew after a scan or a batch of changes and never modified, so requests read
    it without a lock."""

    hashes: np.ndarray  # int64, sorted
    owner: np.ndarray  # int32: the file of each entry, an index into paths
    paths: tuple[Path, ...]
    where: dict[Path, int]  # path -> its index in paths
    suffixes: np.ndarray  # int32: a code per extension, as codes names them
    codes: dict[str, int]

    @classmethod
    def build(cls, files: dict[Path, np.ndarray]) -> _Table:
        paths = tuple(files)
        arrays = [files[p] for p in paths]
        hashes = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
        owner = np.repeat(np.arange(len(paths), dtype=np.int32), [a.size for a in arrays])
        order = np.argsort(hashes, kind="stable")
        codes: dict[str, int] = {}
        suffixes = np.fromiter((codes.setdefault(p.suffix, len(codes)) for p in paths), dtype=np.int32,
                               count=len(paths))
        return cls(hashes[order], owner[order], paths, {p: i for i, p in enumerate(paths)}, suffixes, codes)


def identifier_hashes(text: str) -> np.ndarray:
    """The sorted hashes of the distinct identifiers in `text` (8 bytes each, far less than
    a set of the strings themselves)."""
    words = {w for w in IDENTIFIER.findall(text) if len(w) >= MIN_IDENTIFIER}
    return np.unique(np.fromiter((hash(w) for w in words), dtype=np.int64))


class WorkspaceIndex:
    """Which identifiers each workspace file uses, kept as hashes; the text itself is read from
    disk when a file is picked (the last few cached). Keeping every file's text and a set of
    its words cost many times the memory and time a request (`specfill bench-lsp --workspace`;
    docs/performance.md)."""

    CACHED_TEXTS = 8

    def __init__(self, roots: Iterable[str | Path], max_file_bytes: int = MAX_FILE_BYTES,
                 max_files: int = MAX_FILES, max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.max_file_bytes, self.max_files, self.max_total_bytes = max_file_bytes, max_files, max_total_bytes
        self.ignore = Ignore(self.roots)
        self.files: dict[Path, np.ndarray] = {}  # indexed path -> its identifier hashes
        self._sizes: dict[Path, int] = {}  # characters indexed, per file
        self._table = _Table.build({})
        self._changes = 0  # changes to `files`, ever
        self._built = 0  # how many of them the table holds
        self._texts: OrderedDict[Path, tuple[int, str]] = OrderedDict()  # path -> (mtime_ns, text)
        self._bytes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()

    # -- contents -------------------------------------------------------------------
    @property
    def indexed_bytes(self) -> int:
        return self._bytes

    def _fits(self, text: str | None) -> bool:
        return text is not None and len(self.files) < self.max_files and self._bytes + len(text) <= self.max_total_bytes

    def _add(self, path: Path) -> None:
        if self.ignore.ignored(path):
            return
        text = read_text_file(path, self.roots, self.max_file_bytes)
        with self._lock:
            self._drop(path)
            if text is None or not self._fits(text):
                return
        hashes = identifier_hashes(text)  # outside the lock: requests may score meanwhile
        with self._lock:
            if path not in self.files and text is not None and self._fits(text):
                self.files[path], self._sizes[path] = hashes, len(text)
                self._bytes += len(text)
                self._changes += 1

    def _drop(self, path: Path) -> None:
        """Forget one file (under the lock)."""
        self._texts.pop(path, None)
        if self.files.pop(path, None) is not None:
            self._bytes -= self._sizes.pop(path)
            self._changes += 1

    def _remove(self, path: Path) -> None:
        with self._lock:
            for p in [p for p in self.files if p == path or p.is_relative_to(path)]:
                self._drop(p)

    def rebuild(self) -> None:
        """Build the table from the files indexed now: in the indexer's thread, during and after
        a scan and after each batch of changes (without that thread, as in tests, a request that
        finds it stale builds it first)."""
        with self._lock:
            files, changes = dict(self.files), self._changes
        table = _Table.build(files)
        with self._lock:
            if changes > self._built:  # two builds at once: the later snapshot wins
                self._table, self._built = table, changes

    def scan(self) -> None:
        """Read every eligible file under the roots (directory symlinks are not followed)."""
        try:
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
                        if self._changes - self._built >= REBUILD_EVERY:
                            self.rebuild()  # requests during a long scan see what is read so far
        finally:
            self.rebuild()

    def text(self, path: Path) -> str | None:
        """An indexed file's text as it is on disk now (None: gone, or no longer a text file
        within the limits); the last few read are kept while their mtime holds."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return None
        with self._lock:
            cached = self._texts.get(path)
            if cached is not None and cached[0] == mtime:
                self._texts.move_to_end(path)
                return cached[1]
        text = read_text_file(path, self.roots, self.max_file_bytes)
        if text is not None:
            with self._lock:
                self._texts[path] = (mtime, text)
                while len(self._texts) > self.CACHED_TEXTS:
                    self._texts.popitem(last=False)
        return text

    def related(self, path: str, near: str, n: int = 2, exclude: Iterable[str] = (),
                skip: Callable[[str], bool] = lambda path: False) -> list[IndexedFile]:
        """The `n` files most like the text `near` the cursor (most distinct identifiers
        shared), same extension first; never `path` itself, the `exclude`d (open) ones or those
        `skip` names (kept out of prompts: their text is never read)."""
        if self._thread is None and self._built != self._changes:
            self.rebuild()
        table = self._table
        query = identifier_hashes(near)
        lo = np.searchsorted(table.hashes, query, side="left")
        hi = np.searchsorted(table.hashes, query, side="right")
        if not (hi > lo).any():
            return []
        owners = np.concatenate([table.owner[a:b] for a, b in zip(lo, hi, strict=True) if b > a])
        shared = np.bincount(owners, minlength=len(table.paths)).astype(np.int64)
        for p in (path, *exclude):
            if p and (i := table.where.get(Path(os.path.realpath(p)))) is not None:
                shared[i] = 0
        same = table.suffixes == table.codes.get(Path(path).suffix, -1)
        # Same extension first, then more identifiers shared; ties: the file indexed first.
        score = np.where(shared > 0, shared + same * (1 << 32), 0)
        out = []
        for i in np.argsort(-score, kind="stable"):
            if score[i] <= 0:
                break
            if skip(str(table.paths[i])):
                continue
            if (text := self.text(table.paths[i])) is not None:  # a file gone since is passed over
                out.append(IndexedFile(table.paths[i], text))
                if len(out) == n:
                    break
        return out

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
                self.rebuild()
        except Exception as exc:  # a watcher that cannot start leaves the scanned index
            log.warning("workspace watcher stopped: %s", exc)

    def stop(self) -> None:
        self._stop.set()
