"""`specfill attach`: an editor's stdio joined to the shared server's socket, starting it first
when none answers. Standard library only (no pygls, no llama.cpp), so it starts fast and stays
small: the model lives once, in the shared server (lsp_server/daemon.py).

Where the socket is: $XDG_RUNTIME_DIR/specfill/ (else a 0700 folder in the user's cache dir),
named for the version and the build, so another install or llama.cpp build gets its own server.
A socket or folder owned by another user is never used.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import importlib.util
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from lsp_server import __version__

START_TIMEOUT_S = 60.0  # a first start imports llama.cpp and pygls: seconds on a cold disk
DIAL_EVERY_S = 0.05


class AttachError(Exception):
    """Why the shared server cannot be reached; said to the editor, which shows stderr."""


def runtime_dir() -> Path:
    """The user's private folder for the socket: created 0700, refused if another owns it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        folder = Path(runtime) / "specfill"
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = Path(cache) / "specfill" / "run"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise AttachError(f"{folder} is not a folder of this user's: not using it")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def build_id() -> str:
    """The install and llama.cpp build this process would load, without loading them: the
    interpreter and the llama.cpp library file (path, size, time)."""
    parts = [__version__, os.path.realpath(sys.executable)]
    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.origin:
        lib = Path(spec.origin).parent / "lib"
        for f in sorted(lib.glob("libllama*")) if lib.is_dir() else []:
            st = f.stat()
            parts += [str(f.resolve()), str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def socket_path() -> Path:
    return runtime_dir() / f"specfill-{__version__}-{build_id()}.sock"


def address(path: Path) -> str:
    """What to connect to or bind: the path, or where it is too long for a Unix socket address
    (108 bytes, a deep HOME or runtime folder), its name after moving into its folder."""
    if len(os.fsencode(path)) < 100:
        return str(path)
    os.chdir(path.parent)
    return path.name


def dial(path: Path) -> socket.socket | None:
    """A connection to the server at `path`, or None when nobody answers there. A socket
    another user owns is never dialled."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
        raise AttachError(f"{path} is not a socket of this user's: not dialling it")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address(path))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return None  # a socket left by a server that died
        raise AttachError(f"cannot connect to {path}: {exc.strerror or exc}") from exc
    return sock


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def log_path(path: Path) -> Path:
    return path.with_suffix(".log")


def connect(path: Path, idle_exit_s: float) -> socket.socket:
    """Dial the server; if none answers, start one (under a lock, so editors starting at once
    make one) and dial until it answers."""
    sock = dial(path)
    if sock is not None:
        return sock
    with _locked(path):
        sock = dial(path)  # another attach started it while this one waited for the lock
        if sock is not None:
            return sock
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale: its server is gone
        with open(log_path(path), "ab") as out:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "lsp_server", "daemon", "--socket", str(path), "--idle-exit", str(idle_exit_s)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                close_fds=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while (sock := dial(path)) is None:
            if daemon.poll() is not None:
                raise AttachError(f"the shared server exited with code {daemon.returncode}: see {log_path(path)}")
            if time.monotonic() > deadline:
                raise AttachError(f"the shared server did not answer within {START_TIMEOUT_S:.0f} s: "
                                  f"see {log_path(path)}")
            time.sleep(DIAL_EVERY_S)
        return sock


def forward(sock: socket.socket, path: Path) -> int:
    """Copy the editor's stdin to the socket and the socket to stdout until either ends. The
    server closing first, with the editor neither gone nor having said `exit`, means it died:
    say so, exit 1."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    ended = threading.Event()  # the editor said exit, or closed its end

    def upstream() -> None:
        try:
            while chunk := os.read(stdin.fileno(), 65536):
                if b'"exit"' in chunk:
                    ended.set()
                sock.sendall(chunk)
        except OSError:
            pass
        ended.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=upstream, name="specfill-attach-up", daemon=True).start()
    try:
        while chunk := sock.recv(65536):
            stdout.write(chunk)
            stdout.flush()
    except (OSError, ValueError):
        pass
    if ended.is_set():
        return 0
    print(f"specfill: the shared server ended the connection unasked (its log: {log_path(path)}); "
          "starting the language server again starts it again.", file=sys.stderr, flush=True)
    return 1


def main(socket_arg: str | None, idle_exit_s: float) -> int:
    try:
        path = Path(socket_arg) if socket_arg else socket_path()
        sock = connect(path, idle_exit_s)
    except (AttachError, OSError) as exc:
        print(f"specfill: {exc}", file=sys.stderr, flush=True)
        return 2
    return forward(sock, path)
