"""Which engine a database directory belongs to.

Each engine marks its directory with one file: lsmkv with ``CURRENT`` (the
pointer to its manifest), btree with ``btree.pages`` (its page file). Opening
a directory that belongs to the other engine, or is a non-empty directory of
something else, or is a plain file, fails with InvalidDatabaseError and
changes nothing.
"""

from __future__ import annotations

import os

from .errors import InvalidDatabaseError
from .filenames import parse
from .fs import FileSystem

LSM_MARKER = "CURRENT"
BTREE_MARKER = "btree.pages"

ENGINE_MARKERS = {"lsm": LSM_MARKER, "btree": BTREE_MARKER}


def detect_engine(path: str, fs: FileSystem) -> str | None:
    """"lsm", "btree", or None for a missing or empty directory.

    Raises InvalidDatabaseError for a plain file or a directory that holds
    files but belongs to neither engine.
    """
    if not fs.exists(path):
        return None
    if not fs.isdir(path):
        raise InvalidDatabaseError(f"{path} is a file, not a database directory")
    names = set(fs.listdir(path))
    found = [engine for engine, marker in ENGINE_MARKERS.items() if marker in names]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise InvalidDatabaseError(f"{path} holds files of both engines ({', '.join(sorted(found))}); it is damaged")
    if not names:
        return None
    raise InvalidDatabaseError(
        f"{path} is a non-empty directory that is not an lsmkv or btree database "
        f"(it holds e.g. {sorted(names)[0]!r}); choose an empty or new directory")


def prepare_directory(path: str, engine: str, fs: FileSystem, *, create: bool) -> bool:
    """Check that ``path`` may be opened as ``engine``; create it if allowed.

    Returns True if the database already exists, False if it must be created.
    """
    found = detect_engine(path, fs)
    if found == engine:
        return True
    if found is not None:
        raise InvalidDatabaseError(
            f"{path} is a {found} database, not a {engine} database; open it with {found}.open()"
            if found == "btree" else
            f"{path} is an lsm database, not a {engine} database; open it with lsmkv.open()")
    if not create:
        raise InvalidDatabaseError(f"{path} does not exist (or holds no database) and creation was not allowed")
    fs.makedirs(path)
    return False


#: Files of a btree directory besides its marker (a repair recognises the
#: engine by them when the page file is gone).
_BTREE_FILES = {"btree.pages", "btree.log", "btree.journal", "btree.readers"}
#: btree's reader table (btree/readers.py): readers register in it, so it
#: changes while the data does not.
BTREE_READERS = "btree.readers"
#: Files of a database that hold no data: what its version is does not depend on them.
NO_DATA_FILES = frozenset({BTREE_READERS})


def engine_of_damaged(path: str, fs: FileSystem) -> str:
    """The engine whose files ``path`` holds, also when its marker is damaged
    or missing (``lsmkv repair``): "lsm" if it holds lsmkv tables, logs or
    manifests, "btree" if it holds btree files. InvalidDatabaseError if it
    is a file, missing, or holds neither engine's files."""
    try:
        found = detect_engine(path, fs)
    except InvalidDatabaseError:
        if not fs.isdir(path):
            raise
        found = None
    if found is not None:
        return found
    if not fs.exists(path):
        raise InvalidDatabaseError(f"{path} does not exist")
    names = set(fs.listdir(path))
    lsm = any((parse(n) or ("", 0))[0] in ("table", "log", "manifest") for n in names)
    bt = bool(names & _BTREE_FILES)
    if lsm and not bt:
        return "lsm"
    if bt and not lsm:
        return "btree"
    if lsm and bt:
        raise InvalidDatabaseError(f"{path} holds files of both engines; it is damaged beyond an automatic repair")
    raise InvalidDatabaseError(f"{path} holds no lsmkv or btree database files")


def marker_path(path: str, engine: str) -> str:
    return os.path.join(path, ENGINE_MARKERS[engine])
