"""``btree.dbm``: a btree database behind the standard library's dbm interface.

The same contract as ``lsmkv.dbm`` (flags 'r', 'w', 'c', 'n' with the 's'
and 'f' modifiers, ``error``, str keys and values as UTF-8, ``keys()`` a
list in key order, context manager), on the B+tree::

    import shelve
    import btree.dbm
    with shelve.Shelf(btree.dbm.open("settings", "c")) as shelf:
        shelf["user"] = {"name": "alice"}
"""

from __future__ import annotations

from typing import Any

from lsmkv.base.dbm import Database, error, open_with

__all__ = ["open", "error", "Database"]


def _open(path: str, read_only: bool) -> Any:
    from . import open as btree_open
    return btree_open(path, read_only=read_only)


def _destroy(path: str) -> None:
    from . import destroy
    destroy(path)


def open(file: Any, flag: str = "r", mode: int = 0o666) -> Database:  # noqa: A001 - the dbm interface's name
    """Open the btree database at ``file`` through the dbm interface."""
    return open_with(_open, _destroy, "btree", file, flag, mode)
