"""The compaction worker process: runs merges off the writers' GIL.

Python runs one thread at a time, so a merge loop in a thread of the DB's
process takes its turns from the threads writing. A separate process merges
on the other core while writes go on. The DB (compactor.CompactionWorker)
starts this module with ``python -m lsmkv.lsm.compaction_worker`` and talks to it
over its stdin and stdout (compaction_job.send_message/receive_message): it
sends a CompactionJob; the worker answers ("ok", CompactionResult) or
("error", exception). The worker exits when its stdin closes, and (on Linux)
is killed if the DB's process dies, so it never outlives its database. The
parent-death signal is armed only once the worker runs, well after the DB
process started it (imports take a while): a DB process that died before
that leaves a worker whose parent is already someone else, so the worker
compares its parent with the pid the DB passed (``LSMKV_COMPACTION_PARENT``)
and exits before it takes a job from the pipe.

Nothing in the lsmkv package imports this module; it is only ever run.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys

from lsmkv.base.errors import BackgroundError

from .compaction_job import receive_message, run_compaction, send_message


def _die_with_parent() -> None:
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


#: Environment variable holding the pid of the DB process that started the worker.
PARENT_ENV = "LSMKV_COMPACTION_PARENT"


def _parent_is_gone() -> bool:
    expected = os.environ.get(PARENT_ENV)
    return expected is not None and os.getppid() != int(expected)


def main() -> int:
    _die_with_parent()
    if _parent_is_gone():  # died before the signal was armed: nobody waits for a result
        return 0
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the message stream
    while True:
        job = receive_message(stdin)
        if job is None:
            return 0
        try:
            reply = ("ok", run_compaction(job))
        except BaseException as exc:  # noqa: BLE001 - reported to the DB
            reply = ("error", exc)
        try:
            send_message(stdout, reply)
        except (pickle.PicklingError, TypeError):
            send_message(stdout, ("error", BackgroundError(f"compaction failed: {reply[1]!r}")))


if __name__ == "__main__":
    sys.exit(main())
