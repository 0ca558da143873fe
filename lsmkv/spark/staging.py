"""A write's staging directory: where its tasks put their table files
until the commit ingests them, how it is removed, and how the ones of dead
jobs are found and removed.

``<stagingDir>/.<store name>.ingest-<id>`` is created by the write's
planning with ``owner.json`` inside naming the Spark driver (owners.py).
The commit and the abort remove it: first renamed to
``.<store name>.ingest-<id>.removing`` (so a task still running cannot
put a file back into it: its path is gone), then deleted. A driver that
dies (SIGKILL, a lost machine, a JVM that cannot run the abort during its
shutdown) leaves it behind; the next write planned for the same store in
the same staging directory removes every staging directory of that store
whose driver is no longer running (:func:`remove_stale`). What is not
removed there: a directory whose driver runs on another host (it cannot
be told from a live job; remove it by hand once that job is gone), and a
directory without ``owner.json`` modified in the last day (one being
created this instant has none yet).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid

from .owners import Owner, driver

log = logging.getLogger(__name__)

REMOVING = ".removing"
#: A staging directory without an owner file is taken for abandoned once it
#: has not changed for this long (seconds).
OWNERLESS_AGE_S = 24 * 3600.0


def prefix(store: str) -> str:
    """The name every staging directory of ``store`` starts with."""
    return f".{os.path.basename(os.path.abspath(store).rstrip(os.sep))}.ingest-"


def create(store: str, staging_dir: str) -> str:
    """A new staging directory for a write into ``store``, owned by the
    Spark driver; its path."""
    os.makedirs(staging_dir, exist_ok=True)
    path = os.path.join(staging_dir, prefix(store) + uuid.uuid4().hex[:12])
    os.mkdir(path)
    try:
        driver().write(path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def remove(path: str) -> None:
    """Remove a staging directory and everything in it (nothing if it is gone)."""
    doomed = path + REMOVING
    try:
        os.rename(path, doomed)
    except FileNotFoundError:
        return
    except OSError:
        doomed = path  # e.g. a leftover .removing of the same name: delete in place
    shutil.rmtree(doomed, ignore_errors=True)


def remove_stale(store: str, staging_dir: str) -> list[str]:
    """Remove the staging directories of ``store`` in ``staging_dir`` whose
    Spark driver is no longer running (see the module docstring); the paths
    removed."""
    start = prefix(store)
    try:
        names = os.listdir(staging_dir)
    except FileNotFoundError:
        return []
    removed = []
    for name in sorted(names):
        if not name.startswith(start):
            continue
        path = os.path.join(staging_dir, name)
        if not os.path.isdir(path):
            continue
        if name.endswith(REMOVING):
            # Its remover was interrupted (or still runs: deleting twice is harmless).
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            continue
        owner = Owner.read(path)
        dead = owner.alive() is False if owner is not None else _age(path) > OWNERLESS_AGE_S
        if dead:
            log.info("removing %s, the staging directory of a write whose driver is gone", path)
            remove(path)
            removed.append(path)
    return removed


def _age(path: str) -> float:
    try:
        return time.time() - os.stat(path).st_mtime
    except OSError:
        return 0.0
