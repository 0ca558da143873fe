"""Who owns the files a Spark job leaves beside a store while it runs, and
whether that owner still runs.

A write's staging directory (staging.py) and a checkpoint being taken
(checkpoints.py) record their owner in a small JSON file: the host, the
host's boot id, the process id and the process's start time. The
start time tells a process from a later one that got the same pid; the
boot id tells this boot from an earlier one. :meth:`Owner.alive` answers
"still running?" for an owner on this host (``True``/``False``) and says
``None`` (unknown) for one on another host: files of a job on another host
are never taken for dead.

:func:`driver` is the process whose life is the job's: the Spark driver.
The data source's planning and commit run in Python workers that the
driver's JVM forks (``python -m pyspark.daemon ...``), so the driver is the
first ancestor that is not such a worker; code that runs in a plain Python
process (no Spark worker) owns its files itself. Linux's ``/proc`` answers
all of this. Elsewhere a worker cannot find its driver, so ``driver()``
gives an unknown owner (pid 0, never taken for dead), and for other
processes only the pid is checked.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass

OWNER_FILE = "owner.json"


@dataclass(frozen=True)
class Owner:
    host: str
    boot_id: str
    pid: int
    start: int  # the process's start time in clock ticks since boot (/proc/PID/stat), 0 if unknown

    @classmethod
    def of(cls, pid: int) -> "Owner":
        stat = _stat(pid)
        return cls(socket.gethostname(), _boot_id(), pid, int(stat[19]) if stat else 0)

    def alive(self) -> bool | None:
        """True while the process runs, False once it is gone (or a zombie),
        None when it runs on another host or is not known (pid 0)."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return None
        boot = _boot_id()
        if boot and self.boot_id and boot != self.boot_id:
            return False  # the host has rebooted since
        stat = _stat(self.pid)
        if stat is not None:
            return stat[0] != "Z" and (not self.start or int(stat[19]) == self.start)
        if os.path.exists("/proc/self/stat"):
            return False  # /proc works and has no such process
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def write(self, directory: str) -> None:
        """Record this owner as ``owner.json`` in ``directory``."""
        path = os.path.join(directory, OWNER_FILE)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(asdict(self), f)
        os.replace(path + ".tmp", path)

    @classmethod
    def read(cls, directory: str) -> "Owner | None":
        """The owner recorded in ``directory``, or None when there is none
        (or it does not parse)."""
        try:
            with open(os.path.join(directory, OWNER_FILE), encoding="utf-8") as f:
                raw = json.load(f)
            return cls(str(raw["host"]), str(raw["boot_id"]), int(raw["pid"]), int(raw["start"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def driver() -> Owner:
    """The Spark driver this code runs for: the first process, from this one
    up, that is not one of pyspark's Python workers (its JVM, when this is
    a planning or commit worker; this process otherwise)."""
    pid = os.getpid()
    if _stat(pid) is None:  # no /proc: the driver cannot be found
        return Owner(socket.gethostname(), _boot_id(), 0, 0)
    for _ in range(8):
        if not _is_pyspark_worker(pid):
            break
        stat = _stat(pid)
        if stat is None:
            break
        pid = int(stat[1])
    return Owner.of(pid)


def this_process() -> Owner:
    return Owner.of(os.getpid())


def _is_pyspark_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return any(a == b"-m" and b.startswith(b"pyspark.") for a, b in zip(argv, argv[1:]))


def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state, ppid, ...; the start time is
    index 19), or None when there is no such process or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""
