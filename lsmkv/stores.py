"""One open for a store of either engine, beside the detection of a
directory's engine -- as the standard library's ``dbm.open`` sits on
``dbm.whichdb``.

* :func:`which_engine`: ``"lsm"``, ``"btree"`` or None (nothing there) for
  a path; InvalidDatabaseError for a file or a directory of something else
  (lsmkv/base/dbdir.py).
* :func:`open_store`: open the store at a path with its engine, the one a
  caller names or the one the directory shows; a new store is of the named
  engine, or ``"lsm"``.
* :func:`engine_module`: the engine's module (``lsmkv.lsm`` or ``btree``:
  ``open``, ``checkpoint``, ``destroy``, ``repair``).

Everything above the engines opens stores here: the CLI, the Kafka
loader, the Spark data source, the crash test, the fault scenarios and the
bench. Each caller keeps its own messages for what it refuses before
opening (a missing store, an engine other than the one asked for). The
engines are imported on first use, so importing this module loads
neither; nothing in the engines imports it.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from lsmkv.base.dbdir import detect_engine
from lsmkv.base.errors import InvalidDatabaseError, OptionError
from lsmkv.base.fs import DEFAULT_FS

#: The engines, by the names every command and option uses.
ENGINES = ("lsm", "btree")


def which_engine(path: str | bytes | os.PathLike) -> str | None:
    """The engine of the store at ``path``: "lsm", "btree", or None when
    nothing is there (a missing or empty directory). InvalidDatabaseError
    for a plain file or a directory that holds something else."""
    return detect_engine(os.fsdecode(path), DEFAULT_FS)


def engine_module(engine: str) -> ModuleType:
    """``lsmkv.lsm`` for "lsm", ``btree`` for "btree" (each has open,
    checkpoint, destroy and repair); OptionError for any other name."""
    if engine == "lsm":
        import lsmkv.lsm
        return lsmkv.lsm
    if engine == "btree":
        import btree
        return btree
    raise OptionError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def open_store(path: str | bytes | os.PathLike, *, engine: str | None = None, read_only: bool = False,
               create: bool = True, **options: Any):
    """Open the store at ``path`` and return its DB.

    With ``engine``, that engine opens it (and refuses a directory of the
    other engine, InvalidDatabaseError); without, the engine the directory
    shows (:func:`which_engine`) does, and a path holding no store gets a
    new lsmkv store. Nothing is created when ``create`` is false (a path
    holding no store is an InvalidDatabaseError) or when ``read_only`` (the
    engine's read-only open refuses it). ``options`` are the engine's open
    options. A read-only lsmkv open
    beside a writer in another process retries by itself when it races with
    the writer removing a file (``lsmkv.open``)."""
    if engine is None or not create:
        found = which_engine(path)
        if found is None and not create:
            raise InvalidDatabaseError(f"{os.fsdecode(path)} holds no lsmkv or btree store")
        if engine is None:
            engine = found or "lsm"
    return engine_module(engine).open(path, read_only=read_only, **options)
