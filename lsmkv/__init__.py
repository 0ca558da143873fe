"""lsmkv: an embeddable key-value storage engine built on a log-structured merge-tree.

    import lsmkv
    with lsmkv.open("path/to/db") as db:
        db.put(b"key", b"value")
        db.get(b"key")

The public surface is ``open()``, the DB it returns (with its WriteBatch and
Snapshot), ``destroy()``, ``repair()``, ``checkpoint()``, ``TableWriter``
and ``read_table`` (table files for ``db.ingest``), ``Options``, the error types,
``run_in_transaction`` (a function run in ``db.transaction()`` until it
commits, either engine) and ``lsmkv.dbm`` (the standard library's dbm
interface); everything else is internal.

The package holds three layers (docs/architecture.md): ``lsmkv.base``, what
both engines share; the engines, ``lsmkv.lsm`` (this LSM-tree) and the
top-level ``btree``; and what drives them (``lsmkv.stores``, the one
engine-dispatching open, the Kafka and Spark integrations, the crash test,
the CLI, the bench). Importing ``lsmkv`` loads only the errors and limits
of the base layer: the LSM engine's names (``open``, ``DB``, ...) are
imported from ``lsmkv.lsm`` when first used, so ``import btree``, which
imports ``lsmkv.base``, loads nothing of the LSM engine; so is
``run_in_transaction``, from ``lsmkv.base.retry``.
"""

from __future__ import annotations

# First: decides whether the compiled modules or their sources run (lsmkv/base/build.py).
from lsmkv.base import build as _build  # noqa: F401  (sets up the import of every lsmkv and btree module)
from lsmkv.base.errors import (BackgroundError, ClosedError, ConflictError, CorruptionError, InvalidArgumentError,
                               InvalidDatabaseError, LockError, LsmkvError, MergeError, OptionError, ReadOnlyError,
                               SizeLimitError, SnapshotEndedError, SyncTimeoutError)
from lsmkv.base.keys import MAX_KEY_SIZE, MAX_VALUE_SIZE

__version__ = "0.1.0"

#: The LSM engine's public names, loaded from lsmkv.lsm on first access.
_ENGINE_NAMES = ("open", "destroy", "repair", "checkpoint", "DB", "TableWriter", "TableInfo", "read_table", "Options",
                 "WriteBatch", "Snapshot")
#: The shared layer's public names loaded on first access (by __getattr__).
_BASE_NAMES = ("run_in_transaction",)


def __getattr__(name: str):
    """``lsmkv.open`` and the engine's other names, and ``run_in_transaction``
    (PEP 562): imported on first use, then kept in the module like any other name."""
    if name in _ENGINE_NAMES:
        import lsmkv.lsm
        value = getattr(lsmkv.lsm, name)
        globals()[name] = value
        return value
    if name == "run_in_transaction":
        from lsmkv.base.retry import run_in_transaction
        globals()[name] = run_in_transaction
        return run_in_transaction
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ENGINE_NAMES) | set(_BASE_NAMES))


__all__ = [
    "open", "destroy", "repair", "checkpoint", "DB", "TableWriter", "TableInfo", "read_table", "Options", "WriteBatch",
    "Snapshot", "run_in_transaction", "MAX_KEY_SIZE", "MAX_VALUE_SIZE",
    "BackgroundError", "ClosedError", "CorruptionError", "InvalidArgumentError", "InvalidDatabaseError", "LockError",
    "LsmkvError", "OptionError", "ReadOnlyError", "SizeLimitError", "SnapshotEndedError", "SyncTimeoutError",
    "ConflictError", "MergeError",
]
