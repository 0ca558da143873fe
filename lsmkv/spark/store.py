"""The stores the Spark integration reads and writes, through the engines'
public API only: which engine a directory holds, opening it, checkpoints
and destroy, for ``lsm`` (lsmkv) and ``btree`` alike.

This module owns the choice of engine module for a path and the one clear
error for a path that is not a store; it never imports pyspark.
"""

from __future__ import annotations

import os
from types import ModuleType

from lsmkv.base.dbdir import detect_engine
from lsmkv.base.errors import InvalidDatabaseError, OptionError
from lsmkv.base.fs import DEFAULT_FS

ENGINES = ("lsm", "btree")


def engine_module(engine: str) -> ModuleType:
    """``lsmkv`` for "lsm", ``btree`` for "btree" (each has open, checkpoint, destroy)."""
    if engine == "lsm":
        import lsmkv
        return lsmkv
    if engine == "btree":
        import btree
        return btree
    raise OptionError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def check_engine(engine: str | None) -> str | None:
    if engine is None or engine in ENGINES:
        return engine
    raise OptionError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def detect(path: str) -> str | None:
    """The engine of the store at ``path``, or None when nothing is there
    (a missing or empty directory). InvalidDatabaseError for anything else."""
    return detect_engine(os.fsdecode(path), DEFAULT_FS)


def existing_engine(path: str, engine: str | None = None) -> str:
    """The engine of the existing store at ``path`` (checked against
    ``engine`` when given); InvalidDatabaseError naming the path when there
    is no store there or it is the other engine's."""
    found = detect(path)
    if found is None:
        raise InvalidDatabaseError(f"{path} is not an lsmkv or btree store (nothing there to read)")
    if engine is not None and engine != found:
        raise InvalidDatabaseError(f"{path} is a {found} store, not a {engine} store (option engine={engine})")
    return found


def open_store(path: str, engine: str, *, read_only: bool):
    """Open the store with its engine (a read-only lsmkv open beside a
    writer in another process retries by itself when it races with the
    writer removing a file: ``lsmkv.open``)."""
    return engine_module(engine).open(path, read_only=read_only)
