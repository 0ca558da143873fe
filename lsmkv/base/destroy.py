"""Destroying a database: ``lsmkv.destroy(path)`` and ``btree.destroy(path)``.

LevelDB's DestroyDB, for either engine: the directory must be a database
of that engine (its marker file, dbdir.py) and no process may have it open
for writing (its lock is taken first, and held until the end). Then the
engine's own files go (and ``lost/``, where repairs keep what they set
aside), and the directory itself if nothing else is left in it. Anything
else in the directory is left alone. A path that is not such a database,
or is open, raises and deletes nothing.
"""

from __future__ import annotations

import os
import shutil

from .dbdir import ENGINE_MARKERS, detect_engine
from .errors import InvalidDatabaseError
from .filenames import CURRENT, LOCK, parse
from .fs import DEFAULT_FS, FileSystem
from .set_aside import LOST_DIR

#: Files of a btree directory (and the lock file the engine locks).
_BTREE_FILES = ("btree.pages", "btree.log", "btree.journal", "btree.log.tmp", "btree.readers")


def _engine_files(engine: str, names: list[str]) -> list[str]:
    if engine == "btree":
        return [n for n in names if n in _BTREE_FILES]
    return [n for n in names if n in (CURRENT, LOCK) or parse(n) is not None]


def destroy(path: str | bytes | os.PathLike, engine: str, fs: FileSystem | None = None) -> None:
    """Remove the ``engine`` ("lsm" or "btree") database at ``path``."""
    fs = fs or DEFAULT_FS
    path = os.fsdecode(path)
    found = detect_engine(path, fs)  # InvalidDatabaseError for a file or a foreign directory
    if found is None:
        raise InvalidDatabaseError(f"{path} is not a database (it does not exist or is empty); nothing to destroy")
    if found != engine:
        raise InvalidDatabaseError(f"{path} is a {found} database, not a {engine} one; nothing was deleted")
    lock_name = LOCK if engine == "lsm" else ENGINE_MARKERS["btree"]
    lock = fs.lock(os.path.join(path, lock_name))  # LockError while a writer has it open
    try:
        # The marker goes first (a lock held on an unlinked file still
        # holds): from then on the directory is no database of this engine,
        # whatever is left if the deletion is cut short. The lock file last.
        marker = ENGINE_MARKERS[engine]
        doomed = sorted(_engine_files(engine, fs.listdir(path)),
                        key=lambda n: (n != marker, n == lock_name))
        for name in doomed:
            fs.remove(os.path.join(path, name))
        lost = os.path.join(path, LOST_DIR)
        if fs.isdir(lost):
            shutil.rmtree(lost)
    finally:
        lock.release()
    fs.sync_dir(path)
    if not fs.listdir(path):
        os.rmdir(path)
