"""The driver's half of a bulk write: from the tasks' staged table files
to the store, in one ingest.

``disjoint`` makes the staged files non-overlapping (``db.ingest`` needs
that): files are grouped by overlapping key ranges, and each group of more
than one file is merged (k-way, the duplicate rule of runs.py) into new
files; a write range-partitioned by key (``lsmkv.spark.write``) has no
such group and nothing is rewritten. ``install`` then puts the files into
the store with one ``db.ingest(files, move=True)``:

* append: into the store at the path (created with the chosen engine if
  missing); ingested values are newer than the store's, so for a key
  written again the new value wins. All or nothing (the engines' ingest is
  atomic).
* overwrite: into a new store beside the path, which then replaces the
  old one by two renames (old -> ``<path>.replaced-<id>``, new -> path)
  before the old one is destroyed. Readers never see a mixture: the path
  is the old store, then the new one. The old store must not be open for
  writing (checked first, LockError: nothing changes). A crash between the
  two renames leaves no store at the path and both directories beside it
  (docs/spark.md says how to finish by hand).

This module never imports pyspark.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from . import runs
from .store import detect, engine_module, open_store


@dataclass(frozen=True)
class StagedFile:
    """A finished table file a task wrote, as its commit message carries it."""

    path: str
    smallest: bytes
    largest: bytes
    entries: int
    size: int


def disjoint(files: list[StagedFile], staging: str, target_bytes: int) -> list[StagedFile]:
    """Files holding exactly the data of ``files`` (duplicate keys
    resolved) with no two key ranges overlapping, in key order: their
    entries add up to the distinct keys written. Merged inputs are removed."""
    ordered = sorted(files, key=lambda f: (f.smallest, f.largest))
    groups: list[list[StagedFile]] = []
    high = None
    for f in ordered:
        if groups and f.smallest <= high:
            groups[-1].append(f)
            high = max(high, f.largest)
        else:
            groups.append([f])
            high = f.largest
    out: list[StagedFile] = []
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        merged = runs.write_tables(runs.merge(runs.read(f.path for f in group)), staging, "merged", target_bytes)
        runs.remove(f.path for f in group)
        out.extend(StagedFile(i.path, i.smallest, i.largest, i.entries, i.size) for i in merged)
    return out


def install(path: str, engine: str, paths: list[str], overwrite: bool) -> None:
    """Ingest ``paths`` (disjoint) into the store at ``path`` (see the module docstring)."""
    if not overwrite:
        with open_store(path, engine) as db:
            db.ingest(paths, move=True)
        return
    old_engine = detect(path)
    if old_engine is not None:
        # Take the old store's write lock once: LockError here, before
        # anything changed, if another process has it open for writing.
        open_store(path, old_engine).close()
    tag = uuid.uuid4().hex[:12]
    fresh = f"{path}.overwrite-{tag}"
    try:
        with open_store(fresh, engine) as db:
            db.ingest(paths, move=True)
    except BaseException:
        _destroy_quietly(fresh, engine)
        raise
    if old_engine is None:
        if os.path.exists(path):
            os.rmdir(path)  # an empty directory: detect() found no store there
        os.rename(fresh, path)
        _fsync_dir(os.path.dirname(path))
        return
    replaced = f"{path}.replaced-{tag}"
    os.rename(path, replaced)
    os.rename(fresh, path)
    _fsync_dir(os.path.dirname(path))
    engine_module(old_engine).destroy(replaced)


def _destroy_quietly(path: str, engine: str) -> None:
    try:
        engine_module(engine).destroy(path)
    except Exception:  # noqa: BLE001 - cleaning up after the real error
        pass


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
