"""The LSM engine: an LSM-tree storage engine (``lsmkv.open``).

A WAL-backed skiplist memtable flushed to immutable SSTables (table/),
merged by leveled compaction (compaction.py, compactor.py, a worker
process) and read through a block cache. ``DB`` (db.py) is the only class
that knows every part; docs/architecture.md maps the modules.

This package is the engine's public face, and ``lsmkv`` re-exports it:
``open``, ``destroy``, ``repair``, ``checkpoint``, ``DB``, ``Options``,
``WriteBatch``, ``Snapshot``, ``TableWriter``, ``TableInfo`` and
``read_table``. It builds on the layer both engines share (lsmkv/base/)
and never imports the B+tree or anything above the engines.
"""

from __future__ import annotations

import os

from lsmkv.base.destroy import destroy as _destroy_db
from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import DEFAULT_FS

# The modules checkpoint.py and repair.py are loaded before the functions of
# the same names are defined below, so that ``lsmkv.lsm.checkpoint`` and
# ``lsmkv.lsm.repair`` (and so ``lsmkv.checkpoint`` and ``lsmkv.repair``)
# stay the functions: loading a submodule binds its name in the package,
# and only its first loading does.
from . import checkpoint as _checkpoint_module  # noqa: F401
from .db import DB
from .options import Options
from .repair import repair_db as _repair_db
from .snapshot import Snapshot
from .table_writer import TableInfo, TableWriter, read_table
from .version import VersionSet
from .write_batch import WriteBatch


def open(path: str | bytes | os.PathLike, **options) -> DB:  # noqa: A001 - the public name is open()
    """Open (creating if missing) the lsmkv database in directory ``path``.

    Options are keyword arguments; see :class:`lsmkv.Options` for each one.
    """
    opts = Options.from_kwargs(options)
    if not opts.read_only:
        return DB(path, opts)
    return _open_read_only(path, opts)


def _open_read_only(path, opts: Options) -> DB:
    """A read-only open beside a writer in another process: the writer may
    remove a table or log between the open's reading of the manifest and
    its opening of that file (a compaction or flush finished); the open is
    then simply tried again, on the newer manifest."""
    attempts = 20
    for attempt in range(attempts):
        try:
            return DB(path, opts)
        except (CorruptionError, FileNotFoundError) as exc:
            if (isinstance(exc, CorruptionError) and "is missing" not in str(exc)) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def recorded_merge_operator(path: str | bytes | os.PathLike) -> str | None:
    """The name of the merge operator the database at ``path`` records
    (None if no merge was ever written to it), read from its manifest
    without opening the database."""
    versions = VersionSet(os.fsdecode(path), DEFAULT_FS)
    versions.recover()
    return versions.merge_operator


def destroy(path: str | bytes | os.PathLike) -> None:
    """Delete the lsmkv database at ``path`` (LevelDB's DestroyDB): its files,
    and the directory if nothing else is left in it. Refuses, deleting
    nothing, a path that is not an lsmkv database (InvalidDatabaseError) and
    one another process has open for writing (LockError)."""
    _destroy_db(path, "lsm")


def checkpoint(path: str | bytes | os.PathLike, dest: str | bytes | os.PathLike, *,
               merge_operator=None) -> None:
    """Write a consistent, openable copy of the lsmkv database at ``path``
    into the new directory ``dest`` (see :meth:`DB.checkpoint`), also while
    another process has it open for writing: the store is opened read-only
    and its tables are hard-linked, so the copy costs little more than its
    memtable. A store that holds merge operands needs its ``merge_operator``."""
    with _open_read_only(path, Options.from_kwargs({"read_only": True, "merge_operator": merge_operator})) as db:
        db.checkpoint(dest)


def repair(path: str | bytes | os.PathLike, **options):
    """Rebuild a damaged lsmkv database from what verifies (what
    ``lsmkv repair`` does) and return its :class:`~lsmkv.base.repair_report.RepairReport`:
    what was lost, if anything. Damaged files are kept in ``path/lost/N/``."""
    return _repair_db(os.fsdecode(path), **options)


__all__ = ["open", "destroy", "repair", "checkpoint", "DB", "TableWriter", "TableInfo", "read_table", "Options",
           "WriteBatch", "Snapshot"]
