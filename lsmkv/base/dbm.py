"""The standard library's dbm interface over a database of either engine:
what ``lsmkv.dbm`` and ``btree.dbm`` share.

:class:`Database` (the mapping a dbm ``open`` returns), :class:`error`, the
flags ('r', 'w', 'c', 'n' and the 's'/'f' modifiers) and :func:`open_with`,
which opens a database of one engine given that engine's open and destroy.
The contract (that of ``dbm.dumb``, ``dbm.gnu`` and ``dbm.sqlite3``) is
described in ``lsmkv/dbm.py``. This module never imports an engine: each
engine's dbm module hands it the functions it needs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from .dbdir import detect_engine
from .errors import InvalidDatabaseError, LsmkvError
from .fs import DEFAULT_FS

__all__ = ["error", "Database", "open_with"]


class error(OSError):  # noqa: N801 - the dbm interface names it so
    """A dbm-level failure: no database for 'r'/'w', a bad flag, a closed database."""


def _as_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"dbm {what}s must be bytes or str, not {type(value).__name__}")


class Database(MutableMapping):
    """A database opened through the dbm interface (see the module docstring)."""

    def __init__(self, db: Any, sync: bool, read_only: bool) -> None:
        self._db = db
        self._sync = sync
        self._read_only = read_only

    def _writable_db(self) -> Any:
        db = self._open_db()
        if self._read_only:
            raise error("the database was opened with flag 'r', for reading only")
        return db

    def _open_db(self) -> Any:
        db = self._db
        if db is None:
            raise error("DBM object has already been closed")
        return db

    def __getitem__(self, key: Any) -> bytes:
        value = self._open_db().get(_as_bytes(key, "key"))
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self._writable_db().put(_as_bytes(key, "key"), _as_bytes(value, "value"), sync=self._sync)

    def __delitem__(self, key: Any) -> None:
        db = self._writable_db()
        k = _as_bytes(key, "key")
        if db.get(k) is None:
            raise KeyError(key)
        db.delete(k, sync=self._sync)

    def __contains__(self, key: Any) -> bool:
        if not isinstance(key, (str, bytes, bytearray, memoryview)):
            return False
        return self._open_db().get(_as_bytes(key, "key")) is not None

    def get(self, key: Any, default: Any = None) -> Any:
        value = self._open_db().get(_as_bytes(key, "key"))
        return default if value is None else value

    def setdefault(self, key: Any, default: Any = b"") -> bytes:
        """``d[key]`` if present, else ``default`` stored and returned."""
        value = self.get(key)
        if value is None:
            self[key] = default
            value = _as_bytes(default, "value")
        return value

    def keys(self) -> list[bytes]:  # type: ignore[override] - the dbm interface returns a list
        return list(self)

    def __iter__(self) -> Iterator[bytes]:
        for key, _ in self._open_db().scan():
            yield key

    def __len__(self) -> int:
        return len(self._open_db())

    def sync(self) -> None:
        """Write everything buffered to the database's files."""
        if not self._read_only:
            self._open_db().flush()

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        state = "closed" if self._db is None else self._db.path
        return f"<{type(self).__module__}.{type(self).__name__} {state}>"


_TITLES = {"lsm": "lsmkv", "btree": "btree"}


def _parse_flag(flag: Any) -> tuple[str, bool]:
    if not isinstance(flag, str) or not flag or flag[0] not in "rwcn":
        raise error(f"flag must begin with 'r', 'w', 'c' or 'n', not {flag!r}")
    for modifier in flag[1:]:
        if modifier == "u":
            raise error("flag 'u' (unlocked) is not supported: a writer always holds the database's lock")
        if modifier not in "fs":
            raise error(f"unknown flag modifier {modifier!r} in {flag!r} (known: 'f' fast, 's' synchronized)")
    return flag[0], "s" in flag[1:]


def _replace(path: str, engine: str, destroy: Callable[[str], None]) -> None:
    """'n': clear the way for a new database at ``path``."""
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        os.remove(path)
        return
    try:
        found = detect_engine(path, DEFAULT_FS)
    except InvalidDatabaseError as exc:
        raise error(f"flag 'n' will not replace {path}: {exc}") from None
    if found is None:
        return
    if found != engine:
        raise error(f"flag 'n' will not replace {path}: it is a {_TITLES[found]} database, not a "
                    f"{_TITLES[engine]} one")
    destroy(path)
    if os.path.isdir(path) and not os.listdir(path):
        shutil.rmtree(path)


def open_with(open_db: Callable[..., Any], destroy: Callable[[str], None], engine: str, file: Any,
              flag: str = "r", mode: int = 0o666) -> Database:
    """``open`` for one engine: ``open_db(path, **options)`` opens it,
    ``destroy(path)`` removes one of its databases."""
    try:
        path = os.fsdecode(file)
    except TypeError:
        raise TypeError(f"dbm file must be a str, bytes or os.PathLike path, not {type(file).__name__}") from None
    which, sync = _parse_flag(flag)
    if not isinstance(mode, int) or isinstance(mode, bool):
        raise TypeError(f"dbm mode must be an int, not {type(mode).__name__}")
    if which == "n":
        _replace(path, engine, destroy)
    exists = os.path.isdir(path) and bool(os.listdir(path))
    if which in "rw" and not exists:
        raise error(f"need 'c' or 'n' flag to open new db: {path} holds no database")
    if not os.path.exists(path):
        os.mkdir(path, mode | (mode & 0o444) >> 2)  # searchable where readable
    try:
        db = open_db(path, read_only=which == "r")
    except (InvalidDatabaseError, LsmkvError) as exc:
        raise error(str(exc)) from exc
    return Database(db, sync, which == "r")

