"""Downloading a model file on request (never at completion time): the hub's metadata and the
transfer are huggingface_hub's (it honours HF_ENDPOINT and the user's token); the file grows
as `NAME.part`, which a later pull resumes, and takes its name only once its sha256 is the
hub's. A file that never got its name is never loaded, so the model in use stays in use."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import filelock
import httpx2
from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.file_download import http_get
from huggingface_hub.utils import build_hf_headers, disable_progress_bars

from lsp_server.models.catalog import local_path
from speculative.convert import sha256

Progress = Callable[[int, int], None]  # (bytes on disk, bytes in all)
SHA256 = re.compile(r"^[0-9a-f]{64}$")
SPACE_MARGIN = 64 << 20  # free space kept beyond the file: the cache's other writes need some
NETWORK_ERRORS = (httpx2.TransportError, OfflineModeIsEnabled, ConnectionError, TimeoutError)


class PullError(Exception):
    """A pull that did not finish; the message names the fix. The model in use is untouched."""


def endpoint() -> str:
    return constants.ENDPOINT


def _metadata(repo: str, file: str, revision: str):
    where = f"{file} of {repo}"
    try:
        meta = get_hf_file_metadata(hf_hub_url(repo, file, revision=revision), headers=build_hf_headers())
    except GatedRepoError as exc:
        raise PullError(f"{repo} is gated: accept its terms on the hub, then log in (`hf auth login`) or set "
                        "HF_TOKEN") from exc
    except (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError) as exc:
        raise PullError(f"the hub at {endpoint()} has no {where}: check the name (`specfill model list`)") from exc
    except HfHubHTTPError as exc:
        code = exc.response.status_code if exc.response is not None else "?"
        if code == 404:
            raise PullError(f"the hub at {endpoint()} has no {where} (404): check the name "
                            "(`specfill model list`)") from exc
        raise PullError(f"the hub at {endpoint()} answered {code} for {where}: try again later") from exc
    except NETWORK_ERRORS as exc:
        raise PullError(f"cannot reach the model hub at {endpoint()} ({type(exc).__name__}: {exc}): check the "
                        "network connection (or HF_ENDPOINT, HF_HUB_OFFLINE) and pull again") from exc
    sha = (meta.etag or "").strip('"').lower()
    if not SHA256.match(sha) or meta.size is None:
        raise PullError(f"the hub gave no sha256 and size for {where} (etag {meta.etag!r}): refusing a file "
                        "that cannot be checked")
    return meta, sha


class _Counted:
    """The .part file as huggingface_hub writes it, reporting how much is on disk."""

    def __init__(self, f: BinaryIO, total: int, progress: Progress | None) -> None:
        self.f, self.total, self.progress = f, total, progress

    def write(self, chunk: bytes) -> int:
        n = self.f.write(chunk)
        if self.progress:
            self.progress(self.f.tell(), self.total)
        return n

    def tell(self) -> int:
        return self.f.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.f.seek(offset, whence)

    def truncate(self, size: int | None = None) -> int:  # the server ignored the range: from the start
        return self.f.truncate(size)


def _resume_from(part: Path, stamp: Path, sha: str, size: int) -> int:
    """Bytes of an earlier pull of the same file version to go on from; 0 starts afresh."""
    try:
        same = json.loads(stamp.read_text()).get("sha256") == sha
    except (OSError, ValueError):
        same = False
    have = part.stat().st_size if part.is_file() else 0
    if not same or have > size:
        part.unlink(missing_ok=True)
        return 0
    return have


def _check_space(folder: Path, need: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < need + SPACE_MARGIN:
        raise PullError(f"not enough disk space in {folder}: the download needs {need / 1e6:,.0f} MB and "
                        f"{free / 1e6:,.0f} MB are free; free some space (or set SPECFILL_CACHE_DIR to a bigger "
                        "disk) and pull again")


def _transfer(url: str, part: Path, have: int, size: int, progress: Progress | None) -> None:
    try:
        with part.open("ab") as f, disable_progress_bars():
            http_get(url, _Counted(f, size, progress), resume_size=have, expected_size=size,  # type: ignore[arg-type]
                     headers=build_hf_headers(), displayed_filename=part.name)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise PullError(f"cannot write {part} ({exc.strerror}): free some disk space (or set "
                            "SPECFILL_CACHE_DIR to a bigger disk) and pull again; it goes on from "
                            f"{part.stat().st_size / 1e6:,.0f} MB") from exc
        # The hub's answer cut short, a connection lost for good, an error status mid-way.
        raise PullError(f"the download broke off ({exc}); pull again: it goes on from where it stopped") from exc
    except NETWORK_ERRORS as exc:
        raise PullError(f"the download broke off ({type(exc).__name__}: {exc}); pull again: it goes on from "
                        "where it stopped") from exc


def pull(repo: str, file: str, progress: Progress | None = None, revision: str = "main") -> Path:
    """The file, downloaded (or resumed) and checked; a PullError says why not. A pull already
    whole returns at once, without asking the hub."""
    dest = local_path(repo, file)
    if dest.is_file():
        return dest
    meta, sha = _metadata(repo, file, revision)
    size = int(meta.size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part, stamp = dest.with_name(dest.name + ".part"), dest.with_name(dest.name + ".part.json")
    try:
        lock = filelock.FileLock(str(dest) + ".lock", timeout=0)
        lock.acquire()
    except filelock.Timeout as exc:
        raise PullError(f"{file} is being pulled already (another editor window?): wait for that one") from exc
    try:
        have = _resume_from(part, stamp, sha, size)
        _check_space(dest.parent, size - have)
        stamp.write_text(json.dumps({"repo": repo, "file": file, "sha256": sha, "commit": meta.commit_hash}))
        _transfer(meta.location, part, have, size, progress)
        got = sha256(part)
        if got != sha:
            part.unlink()
            stamp.unlink(missing_ok=True)
            raise PullError(f"{file} arrived damaged: its sha256 is {got}, the hub's {sha}; it was deleted, pull "
                            "again")
        os.replace(part, dest)
        stamp.unlink(missing_ok=True)
        return dest
    finally:
        lock.release()
