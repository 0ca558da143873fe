"""The stores the Spark integration reads and writes, through the engines'
public API only: which engine a directory holds, opening it, checkpoints
and destroy, for ``lsm`` (lsmkv) and ``btree`` alike, by way of the one
engine-dispatching open (lsmkv/stores.py).

This module owns the one clear error for a path that is not a store (or
not of the engine an option names); it never imports pyspark.
"""

from __future__ import annotations

from types import ModuleType

from lsmkv.base.errors import InvalidDatabaseError, OptionError
from lsmkv.stores import ENGINES, engine_module as _engine_module, open_store as _open_store, which_engine

__all__ = ["ENGINES", "engine_module", "check_engine", "detect", "existing_engine", "open_store"]


def engine_module(engine: str) -> ModuleType:
    """The engine's module for "lsm" or "btree" (each has open, checkpoint,
    destroy); OptionError for any other name."""
    return _engine_module(engine)


def check_engine(engine: str | None) -> str | None:
    if engine is None or engine in ENGINES:
        return engine
    raise OptionError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def detect(path: str) -> str | None:
    """The engine of the store at ``path``, or None when nothing is there
    (a missing or empty directory). InvalidDatabaseError for anything else."""
    return which_engine(path)


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


def open_store(path: str, engine: str, *, read_only: bool = False):
    """Open (creating if missing, unless ``read_only``) the store with its
    engine (a read-only lsmkv open beside a writer in another process
    retries by itself when it races with the writer removing a file:
    ``lsmkv.open``)."""
    return _open_store(path, engine=engine, read_only=read_only)
