"""The data source's options (``.option(name, value)``), parsed and checked
once, with one clear error (an OptionError naming the option) for a bad
value or an unknown name.

Read: ``engine``, ``decode``, ``numPartitions``, ``minPartitionBytes``, ``consistent``,
``checkpointDir``, ``checkpointRetention``, ``maxCheckpoints``, ``batchRows``, ``pushdown``.
Write: ``engine``, ``taskSortBufferBytes``, ``targetFileBytes``,
``stagingDir``, ``expectedRows``, ``expectedKeys``. docs/spark.md describes each. Option names are
case-insensitive (Spark lowercases them).
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from typing import Mapping

from lsmkv.base.errors import OptionError

from .checkpoints import DEFAULT_KEEP, DEFAULT_RETENTION_S, default_dir
from .store import check_engine

READ_OPTIONS = ("path", "engine", "decode", "numpartitions", "minpartitionbytes", "consistent", "checkpointdir",
                "checkpointretention", "maxcheckpoints", "batchrows", "pushdown")
WRITE_OPTIONS = ("path", "engine", "tasksortbufferbytes", "targetfilebytes", "stagingdir", "expectedrows",
                 "expectedkeys")

DEFAULT_MIN_PARTITION_BYTES = 8 * 1024 * 1024
DEFAULT_SORT_BUFFER = 256 * 1024 * 1024
DEFAULT_TARGET_FILE = 64 * 1024 * 1024


#: Option names as documented (Spark hands them over lowercased).
_SPELLING = {name.lower(): name for name in (
    "numPartitions", "minPartitionBytes", "checkpointDir", "checkpointRetention", "maxCheckpoints", "batchRows",
    "taskSortBufferBytes", "targetFileBytes", "stagingDir", "expectedRows", "expectedKeys")}


def _shown(name: str) -> str:
    return _SPELLING.get(name, name)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in dict(options).items()}


def _check_names(opts: dict[str, str], known: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(opts) - set(known))
    if unknown:
        raise OptionError(f"unknown {what} option(s) {', '.join(unknown)} for format lsmkv "
                          f"(known: {', '.join(_shown(k) for k in known if k != 'path')})")


def _path(opts: dict[str, str]) -> str:
    path = opts.get("path")
    if not path:
        raise OptionError("no store path: use .load(PATH) / .save(PATH) (or .option('path', PATH))")
    if path.startswith("file:"):
        path = path[len("file:"):]
        while path.startswith("//"):
            path = path[1:]
    return os.path.abspath(path)


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {_shown(name)} must be true or false, not {raw!r}")


def _int(opts: dict[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).replace("_", ""))
    except ValueError:
        raise OptionError(f"option {_shown(name)} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {_shown(name)} must be at least {minimum}, not {value}")
    return value


def _engine(opts: dict[str, str]) -> str | None:
    return check_engine(opts.get("engine"))


@dataclass(frozen=True)
class ReadOptions:
    path: str
    engine: str | None
    decode: str | None
    num_partitions: int | None
    min_partition_bytes: int
    consistent: bool
    checkpoint_dir: str
    checkpoint_retention_s: float
    max_checkpoints: int
    batch_rows: int
    pushdown: bool

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "ReadOptions":
        opts = _lower(options)
        _check_names(opts, READ_OPTIONS, "read")
        path = _path(opts)
        decode = opts.get("decode")
        if decode is not None:
            try:
                codecs.lookup(decode)
            except LookupError:
                raise OptionError(f"option decode: unknown charset {decode!r}") from None
        raw_retention = opts.get("checkpointretention")
        try:
            retention = DEFAULT_RETENTION_S if raw_retention is None else float(raw_retention)
        except ValueError:
            raise OptionError(f"option checkpointRetention must be seconds, not {raw_retention!r}") from None
        if retention < 0:
            raise OptionError(f"option checkpointRetention must be at least 0, not {retention}")
        return cls(path=path, engine=_engine(opts), decode=decode,
                   num_partitions=_int(opts, "numpartitions", None, 1),
                   min_partition_bytes=_int(opts, "minpartitionbytes", DEFAULT_MIN_PARTITION_BYTES, 1),
                   consistent=_bool(opts, "consistent", True),
                   checkpoint_dir=os.path.abspath(opts.get("checkpointdir") or default_dir(path)),
                   checkpoint_retention_s=retention,
                   max_checkpoints=_int(opts, "maxcheckpoints", DEFAULT_KEEP, 1),
                   batch_rows=_int(opts, "batchrows", 4096, 1),
                   pushdown=_bool(opts, "pushdown", False))


@dataclass(frozen=True)
class WriteOptions:
    path: str
    engine: str | None
    sort_buffer_bytes: int
    target_file_bytes: int
    staging_dir: str
    expected_rows: int | None = None
    expected_keys: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "WriteOptions":
        opts = _lower(options)
        _check_names(opts, WRITE_OPTIONS, "write")
        path = _path(opts)
        return cls(path=path, engine=_engine(opts),
                   sort_buffer_bytes=_int(opts, "tasksortbufferbytes", DEFAULT_SORT_BUFFER, 1),
                   target_file_bytes=_int(opts, "targetfilebytes", DEFAULT_TARGET_FILE, 4096),
                   staging_dir=os.path.abspath(opts.get("stagingdir") or os.path.dirname(path)),
                   expected_rows=_int(opts, "expectedrows", None, 0),
                   expected_keys=_int(opts, "expectedkeys", None, 0))
