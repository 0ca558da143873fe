"""``lsmkv.dbm``: an lsmkv database behind the standard library's dbm interface.

Python programs have kept persistent dicts through ``dbm`` (and ``shelve`` on
top of it) for decades; this module gives them an lsmkv database without a
new API::

    import shelve
    import lsmkv.dbm
    with shelve.Shelf(lsmkv.dbm.open("settings", "c")) as shelf:
        shelf["user"] = {"name": "alice"}

It follows the contract of ``dbm.dumb``/``dbm.gnu``/``dbm.sqlite3``:

* ``open(file, flag='r', mode=0o666)``: ``file`` is a path (str, bytes or
  ``os.PathLike``) of the database directory. ``flag`` is ``'r'`` (read
  only; the database must exist), ``'w'`` (read and write; it must exist),
  ``'c'`` (read and write, created if missing) or ``'n'`` (a new, empty
  database, replacing whatever is at the path: a database of this engine, a
  plain file or an empty directory; a directory holding anything else is
  refused). Modifiers: ``'s'`` (synchronized: every write is fsynced before
  it returns) and ``'f'`` (fast: the default, writes are handed to the OS)
  are accepted; ``'u'`` (unlocked) is refused, since a writer always holds
  the database's lock. ``mode`` is the permission of a directory created
  for the database (less the umask).
* :class:`error` (an ``OSError``) when ``'r'`` or ``'w'`` finds no
  database, for a flag it does not know, and for use after ``close()``.
* The object is a mapping of bytes to bytes in which str keys and values
  are encoded as UTF-8 (as ``dbm.dumb`` does): ``d[key]`` (KeyError if
  absent), ``d[key] = value``, ``del d[key]``, ``key in d``, ``len(d)``,
  ``get``, ``setdefault``, ``keys()`` (a list, in key order), iteration,
  ``sync()``, ``close()`` and the context-manager protocol.

``btree.dbm`` is the same interface on the B+tree; what the two share is
in lsmkv/base/dbm.py. Importing this module loads no engine: the LSM
engine is imported when a database is first opened.
"""

from __future__ import annotations

from typing import Any

from lsmkv.base.dbm import Database, error, open_with

__all__ = ["open", "error", "Database", "open_with"]


def _lsm_open(path: str, read_only: bool) -> Any:
    from . import open as lsm_open
    return lsm_open(path, read_only=read_only)


def _lsm_destroy(path: str) -> None:
    from . import destroy
    destroy(path)


def open(file: Any, flag: str = "r", mode: int = 0o666) -> Database:  # noqa: A001 - the dbm interface's name
    """Open the lsmkv database at ``file`` through the dbm interface."""
    return open_with(_lsm_open, _lsm_destroy, "lsm", file, flag, mode)
