"""The Spark load job: a file of records (Parquet, CSV or JSON) into a
store of either engine by bulk ingest (``lsmkv spark load``).

Stages: read the input, pick and check the key and value columns (binary
or string; other atomic types are written as their string form), count
the input's distinct keys, write through ``lsmkv.spark.write`` (range
partitioning, sorted table files, one ingest), then count the keys in the
store and compare. Each stage reports one line through ``progress``;
nothing here prints. The same code runs under spark-submit on a cluster
(the store path must be one the driver and every executor see).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import LsmkvError

FORMATS = ("parquet", "csv", "json")


class LoadError(LsmkvError):
    """Bad input to the load job (a missing column, an unknown format...)."""


@dataclass
class LoadResult:
    input_rows: int
    distinct_keys: int
    keys_before: int
    keys_after: int
    seconds: float
    ok: bool
    check: str


def input_format(path: str, given: str | None) -> str:
    if given:
        if given not in FORMATS:
            raise LoadError(f"--format must be one of {', '.join(FORMATS)}, not {given!r}")
        return given
    name = path.rstrip("/").lower()
    for fmt, endings in (("parquet", (".parquet", ".pq")), ("csv", (".csv", ".csv.gz")),
                         ("json", (".json", ".jsonl", ".ndjson", ".json.gz"))):
        if name.endswith(endings):
            return fmt
    raise LoadError(f"cannot tell the format of {path} from its name; give --format parquet|csv|json")


def read_input(spark: Any, path: str, fmt: str) -> Any:
    if not os.path.exists(path) and "://" not in path:
        raise LoadError(f"{path}: no such file or directory")
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true")
    return reader.format(fmt).load(path)


def key_value_frame(df: Any, key_col: str, value_col: str) -> Any:
    """``df`` as the two columns key and value (binary or string)."""
    from pyspark.sql.functions import col
    types = dict(df.dtypes)
    for flag, name in (("--key-col", key_col), ("--value-col", value_col)):
        if name not in types:
            raise LoadError(f"{flag} {name}: the input has no such column (columns: {', '.join(types)})")
    out = []
    for name, alias in ((key_col, "key"), (value_col, "value")):
        kind = types[name]
        if kind in ("binary", "string"):
            out.append(col(name).alias(alias))
        elif kind.startswith(("struct", "array", "map")):
            raise LoadError(f"column {name} is {kind}; lsmkv stores binary or string values "
                            f"(serialize it first, e.g. to_json)")
        else:
            out.append(col(name).cast("string").alias(alias))
    return df.select(*out)


def count_keys(path: str) -> int:
    from .store import detect, open_store
    engine = detect(path)
    if engine is None:
        return 0
    with open_store(path, engine, read_only=True) as db:
        return sum(1 for _ in db.scan())


def load(spark: Any, input_path: str, *, key_col: str, value_col: str, db: str, engine: str,
         mode: str = "append", fmt: str | None = None, num_partitions: int | None = None,
         progress: Callable[[str], None] = lambda line: None) -> LoadResult:
    from . import write
    t0 = time.perf_counter()
    fmt = input_format(input_path, fmt)
    progress(f"reading {input_path} ({fmt})")
    frame = key_value_frame(read_input(spark, input_path, fmt), key_col, value_col)
    nulls = frame.filter("key IS NULL OR value IS NULL").count()
    if nulls:
        raise LoadError(f"{nulls} input row(s) have a null {key_col} or {value_col}; lsmkv stores no nulls "
                        f"(drop or fill them first)")
    frame = frame.cache()
    rows = frame.count()
    distinct = frame.select("key").distinct().count()
    progress(f"input: {rows:,} rows, {distinct:,} distinct keys")
    before = count_keys(db) if mode == "append" else 0
    if mode == "append" and before:
        progress(f"store {db}: {before:,} keys before the load")
    progress(f"writing into {db} ({engine}, {mode}): range partitioning, sorted table files, one ingest")
    t1 = time.perf_counter()
    write(frame, db, engine=engine, mode=mode, num_partitions=num_partitions)
    progress(f"ingested in {time.perf_counter() - t1:.1f} s")
    frame.unpersist()
    after = count_keys(db)
    if mode == "overwrite" or not before:
        ok = after == distinct
        check = f"distinct input keys {distinct:,}, keys in the store {after:,}: " + ("equal" if ok else "DIFFERENT")
    else:
        ok = max(before, distinct) <= after <= before + distinct
        check = (f"distinct input keys {distinct:,}, keys before {before:,}, keys in the store {after:,}: "
                 + ("consistent" if ok else "INCONSISTENT") + " (before + new keys of the input)")
    progress(check)
    return LoadResult(rows, distinct, before, after, time.perf_counter() - t0, ok, check)
