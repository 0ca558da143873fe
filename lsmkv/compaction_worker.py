"""The compaction worker process: runs merges off the writers' GIL.

Python runs one thread at a time, so a merge loop in a thread of the DB's
process takes its turns from the threads writing. A separate process merges
on the other core while writes go on. The DB starts this module with
``python -m lsmkv.compaction_worker`` and talks to it over its stdin and
stdout: each message is a 4-byte big-endian length followed by a pickle. The
DB sends a CompactionJob; the worker answers ("ok", CompactionResult) or
("error", exception). The worker exits when its stdin closes, and (on Linux)
is killed if the DB's process dies, so it never outlives its database.

A plain subprocess rather than multiprocessing: multiprocessing's spawn and
forkserver start methods re-run the user's main module in the child, which
breaks scripts without an ``if __name__ == "__main__"`` guard, and fork is
unsafe in a process that already runs threads.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from typing import BinaryIO

from .compaction_job import CompactionJob, CompactionResult, run_compaction
from .errors import BackgroundError

_LENGTH = struct.Struct(">I")


def _send(stream: BinaryIO, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _receive(stream: BinaryIO) -> object | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    (n,) = _LENGTH.unpack(header)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def _die_with_parent() -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def main() -> int:
    _die_with_parent()
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    # Nothing else may write to the protocol stream.
    sys.stdout = sys.stderr
    while True:
        job = _receive(stdin)
        if job is None:
            return 0
        try:
            reply = ("ok", run_compaction(job))
        except BaseException as exc:  # noqa: BLE001 - reported to the DB
            reply = ("error", exc)
        try:
            _send(stdout, reply)
        except (pickle.PicklingError, TypeError):
            _send(stdout, ("error", BackgroundError(f"compaction failed: {reply[1]!r}")))


def _worker_environment() -> dict:
    """Import this very lsmkv in the worker (also when it runs from a source
    tree), and never modules that happen to sit in the current directory."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONSAFEPATH": "1",
            "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


class CompactionWorker:
    """The DB side: starts the worker on first use and runs jobs on it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def run(self, job: CompactionJob) -> CompactionResult:
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                proc = self._proc = subprocess.Popen(
                    [sys.executable, "-m", "lsmkv.compaction_worker"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, env=_worker_environment())
            try:
                _send(proc.stdin, job)
                reply = _receive(proc.stdout)
            except (BrokenPipeError, OSError) as exc:
                reply = None
                cause: BaseException | None = exc
            else:
                cause = None
            if reply is None:
                proc.kill()
                self._proc = None
                raise BackgroundError(f"the compaction worker process exited (code {proc.wait()})") from cause
            status, value = reply
            if status == "error":
                raise value
            return value

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            proc.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
