"""lsmkv: an embeddable key-value storage engine built on a log-structured merge-tree.

    import lsmkv
    with lsmkv.open("path/to/db") as db:
        db.put(b"key", b"value")
        db.get(b"key")

The public surface is ``open()``, the DB it returns (with its WriteBatch and
Snapshot), ``Options`` and the error types; everything else is internal.
"""

from __future__ import annotations

import os

from .db import DB
from .errors import (BackgroundError, ClosedError, CorruptionError, InvalidDatabaseError, LockError,
                     LsmkvError, OptionError, ReadOnlyError, SizeLimitError)
from .keys import MAX_KEY_SIZE, MAX_VALUE_SIZE
from .options import Options
from .snapshot import Snapshot
from .write_batch import WriteBatch

__version__ = "0.1.0"


def open(path: str | os.PathLike, **options) -> DB:  # noqa: A001 - the public name is open()
    """Open (creating if missing) the lsmkv database in directory ``path``.

    Options are keyword arguments; see :class:`lsmkv.Options` for each one.
    """
    return DB(path, Options.from_kwargs(options))


__all__ = [
    "open", "DB", "Options", "WriteBatch", "Snapshot", "MAX_KEY_SIZE", "MAX_VALUE_SIZE",
    "BackgroundError", "ClosedError", "CorruptionError", "InvalidDatabaseError", "LockError",
    "LsmkvError", "OptionError", "ReadOnlyError", "SizeLimitError",
]
