"""Read checkpoints: the consistent copies of a store that a Spark read
goes through, where they live and when they are removed.

A consistent read (the default) plans on the driver: it takes one
checkpoint of the store (``lsmkv.checkpoint`` / ``btree.checkpoint``) into
a new directory ``<checkpoint dir>/ckpt-<ms>-<id>``, and every partition
reads that copy, so all partitions see one version of the store even while
another process writes to it. Spark gives a Python reader no end-of-query
hook, so a checkpoint cannot be removed when its query ends. Instead:

* while a partition reads a checkpoint it holds a shared ``flock`` on
  ``ckpt-....lock`` beside it;
* every consistent read planned against a checkpoint directory first
  removes that directory's checkpoints older than the retention (one hour
  by default) whose lock it can take exclusively (no partition is reading
  them);
* :func:`remove_checkpoints` removes them on demand (``older_than=0``:
  every checkpoint no partition is reading right now).

A query whose tasks start more than the retention after it was planned
(a very busy cluster) fails with an error saying so instead of reading a
different version. The default checkpoint directory is
``<parent>/.<store name>.spark-checkpoints``: on the store's file system,
so lsmkv's checkpoint hard-links its tables (it costs about the memtable),
and seen by every executor that sees the store. A btree checkpoint copies
the live data (docs/spark.md).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid

from .store import engine_module

PREFIX = "ckpt-"
DEFAULT_RETENTION_S = 3600.0


def default_dir(store: str) -> str:
    store = os.path.abspath(os.fsdecode(store)).rstrip(os.sep)
    parent, name = os.path.split(store)
    return os.path.join(parent, f".{name}.spark-checkpoints")


def _lock_path(checkpoint: str) -> str:
    return checkpoint.rstrip(os.sep) + ".lock"


def take(store: str, engine: str, directory: str, retention_s: float = DEFAULT_RETENTION_S) -> str:
    """Remove expired checkpoints of ``directory``, then write a new
    checkpoint of ``store`` there; its path."""
    remove_checkpoints(directory, older_than=retention_s)
    os.makedirs(directory, exist_ok=True)
    name = f"{PREFIX}{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}"
    dest = os.path.join(directory, name)
    with open(_lock_path(dest), "a"):
        pass
    try:
        engine_module(engine).checkpoint(store, dest)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        try:
            os.remove(_lock_path(dest))
        except OSError:
            pass
        raise
    return dest


class Lease:
    """A partition's shared hold on a checkpoint while it reads it."""

    def __init__(self, checkpoint: str) -> None:
        self._fd = None
        try:
            self._fd = os.open(_lock_path(checkpoint), os.O_RDWR)
        except FileNotFoundError:
            pass
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_SH)
        if self._fd is None or not os.path.isdir(checkpoint):
            self.release()
            raise FileNotFoundError(
                f"the read checkpoint {checkpoint} is gone: its query started reading after the "
                f"checkpoint retention had expired (option checkpointRetention) or it was removed by hand; "
                f"run the query again")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def remove_checkpoints(directory: str, older_than: float = 0.0) -> list[str]:
    """Remove the checkpoints in ``directory`` taken more than
    ``older_than`` seconds ago that no partition is reading; the paths
    removed. A missing directory has none."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    now_ms = time.time() * 1000
    removed = []
    for name in sorted(names):
        if not name.startswith(PREFIX):
            continue
        try:
            taken_ms = int(name[len(PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if now_ms - taken_ms < older_than * 1000:
            continue
        path = os.path.join(directory, name)
        if name.endswith(".lock"):
            if not os.path.exists(path[:-len(".lock")]):
                try:  # left by a planner that died between the lock and the copy
                    os.remove(path)
                except OSError:
                    pass
            continue
        lock = _lock_path(path)
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            fd = None
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a partition is reading it
            shutil.rmtree(path, ignore_errors=True)
            if fd is not None:
                os.remove(lock)
            removed.append(path)
        finally:
            if fd is not None:
                os.close(fd)
    try:
        os.rmdir(directory)  # only when empty
    except OSError:
        pass
    return removed
