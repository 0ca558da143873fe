"""What a loader's ``--db`` path holds, and opening one store there.

A path is either one store of either engine or a shard directory (the
layout marker file ``LSMKV-SHARDS`` in it; shards.py owns that layout).
:func:`open_store` opens one store -- a loader's single store, or one
partition's shard in a shard directory -- through the one engine-dispatching
open (``lsmkv.stores.open_store``), with the options a loader gives an LSM
store, and refuses a shard directory or a store of the other engine with
one LoaderError.
"""

from __future__ import annotations

import os

from lsmkv.stores import open_store as open_engine_store, which_engine

from .errors import LoaderError

#: Name of the layout marker file inside a shard directory.
MARKER = "LSMKV-SHARDS"

#: Options a loader opens an lsmkv store with unless given others. A
#: bigger memtable than lsmkv's default (4 MiB) absorbs a keyed stream's
#: overwrites before they reach level 0: measured with `lsmkv bench --suite
#: kafka` (2M records over 200K keys), 84K records/s with 4 MiB, 143K/s with
#: 16 MiB, 158K/s with 64 MiB.
LSM_STORE_DEFAULTS = {"write_buffer_size": 16 * 1024 * 1024}


def is_shard_directory(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a shard directory (holds the layout marker)."""
    return os.path.isfile(os.path.join(os.fspath(path), MARKER))


def open_store(path: str | os.PathLike, engine: str, options: dict | None = None):
    """Open (creating if missing) the store at ``path`` with ``engine``
    ("lsm" or "btree"); an existing store keeps its own engine. An lsmkv
    store gets LSM_STORE_DEFAULTS under ``options``."""
    if is_shard_directory(path):
        raise LoaderError(f"{os.fsdecode(path)} is a shard directory (partitioned state), not one store; load it "
                          "with --partitioned or --serve")
    found = which_engine(path)
    kind = found or engine
    if kind not in ("lsm", "btree"):
        raise LoaderError(f"engine must be 'lsm' or 'btree', not {engine!r}")
    if found is not None and engine is not None and found != engine:
        raise LoaderError(f"{path} holds a {found} database, not {engine}")
    options = dict(options or {})
    if kind == "lsm":
        options = {**LSM_STORE_DEFAULTS, **options}
    return open_engine_store(path, engine=kind, **options)
