"""The Spark load job: a file of records (Parquet, CSV or JSON) into a
store of either engine by bulk ingest (``lsmkv spark load``).

:func:`check_request` checks what can be checked without Spark -- the
input's format and that it exists, the store and its engine -- so a bad
request fails in a moment with one error, before a session starts.
:func:`load` then reads the input, picks and checks the key and value
columns (binary or string; other atomic types are written as their string
form), counts the input's rows and distinct keys, and writes through
``lsmkv.spark.write`` (range partitioning, sorted table files, one ingest)
with those counts as ``expectedRows``/``expectedKeys``: the commit compares
them with what the tasks received and wrote (their commit messages carry
the rows each task received and the entries of each table file) and
ingests nothing if they differ. The store is never scanned. Each stage
reports one line through ``progress``; nothing here prints. The same code
runs under spark-submit on a cluster (the store path must be one the
driver and every executor see).
"""

from __future__ import annotations

import glob
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from lsmkv.base.errors import LsmkvError

FORMATS = ("parquet", "csv", "json")


class LoadError(LsmkvError):
    """Bad input to the load job (a missing column, an unknown format...)."""


@dataclass
class LoadResult:
    input_rows: int
    distinct_keys: int
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


def engine_for(db: str, engine: str | None) -> str:
    """The engine a load writes: ``engine`` if given, else the existing
    store's, else lsm."""
    if engine is not None:
        return engine
    from .store import detect
    return detect(db) or "lsm"


def check_request(input_path: str, fmt: str | None, db: str, engine: str, mode: str) -> str:
    """Check a load before Spark starts: the input's format (returned) and
    that the input exists (a local path; a URI such as hdfs://... is left
    to Spark), the engine, the mode, and that ``db`` is missing, empty or a
    store the load may write (append needs the store's own engine).
    LoadError (or InvalidDatabaseError) naming the problem."""
    from .store import ENGINES, detect
    fmt = input_format(input_path, fmt)
    local = _local_path(input_path)
    if local is not None and not (glob.glob(local) if glob.has_magic(local) else os.path.exists(local)):
        raise LoadError(f"--input {input_path}: no such file or directory")
    if engine not in ENGINES:
        raise LoadError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if mode not in ("append", "overwrite"):
        raise LoadError(f"--mode must be append or overwrite, not {mode!r}")
    found = detect(db)  # InvalidDatabaseError: a file, or a directory of other files
    if found is not None and found != engine and mode == "append":
        raise LoadError(f"--db {db} is {_an(found)} store; a load with --engine {engine} cannot append to it "
                        f"(give --engine {found}, or --mode overwrite to replace it with {_an(engine)} store)")
    if found is None:
        parent = os.path.dirname(os.path.abspath(db))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            raise LoadError(f"--db {db}: cannot create it ({parent} is not a writable directory)")
    return fmt


def _an(engine: str) -> str:
    return f"an {engine}" if engine == "lsm" else f"a {engine}"


def _local_path(path: str) -> str | None:
    """``path`` as a local file name, or None for a URI of another file system."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if path.startswith("file:"):
        return path[len("file:"):]
    return None if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) else path


def read_input(spark: Any, path: str, fmt: str) -> Any:
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


def load(spark: Any, input_path: str, *, key_col: str, value_col: str, db: str, engine: str | None = None,
         mode: str = "append", fmt: str | None = None, num_partitions: int | None = None,
         progress: Callable[[str], None] = lambda line: None) -> LoadResult:
    """Load the file at ``input_path`` into the store ``db`` (module
    docstring); ``engine`` None: the existing store's, else lsm."""
    from pyspark.sql import functions as F
    t0 = time.perf_counter()
    engine = engine_for(db, engine)
    fmt = check_request(input_path, fmt, db, engine, mode)
    progress(f"reading {input_path} ({fmt})")
    frame = key_value_frame(read_input(spark, input_path, fmt), key_col, value_col).cache()
    try:
        counts = frame.agg(F.count(F.lit(1)).alias("rows"),
                           F.count(F.when(F.col("key").isNull() | F.col("value").isNull(), 1)).alias("nulls")).first()
        rows, nulls = int(counts["rows"]), int(counts["nulls"])
        if nulls:
            raise LoadError(f"{nulls} input row(s) have a null {key_col} or {value_col}; lsmkv stores no nulls "
                            f"(drop or fill them first)")
        distinct = frame.select("key").distinct().count()
        progress(f"input: {rows:,} rows, {distinct:,} distinct keys")
        progress(f"writing into {db} ({engine}, {mode}): range partitioning, sorted table files, one ingest")
        t1 = time.perf_counter()
        ok, check = write_checked(frame, db, engine=engine, mode=mode, num_partitions=num_partitions,
                                  rows=rows, keys=distinct)
        if ok:
            progress(f"ingested in {time.perf_counter() - t1:.1f} s")
    finally:
        frame.unpersist()
    progress(check)
    return LoadResult(rows, distinct, time.perf_counter() - t0, ok, check)


def write_checked(frame: Any, db: str, *, engine: str, mode: str, num_partitions: int | None,
                  rows: int, keys: int) -> tuple[bool, str]:
    """Write ``frame`` into ``db``, expecting its tasks to receive ``rows``
    rows and write ``keys`` distinct keys (the writer's commit checks and
    ingests nothing if they do not): (True, what was checked), or (False,
    the commit's error) when the counts differ. Any other failure of the
    write is a LoadError of one line."""
    from . import write
    try:
        write(frame, db, engine=engine, mode=mode, num_partitions=num_partitions, expectedRows=rows,
              expectedKeys=keys)
    except Exception as exc:  # noqa: BLE001 - Spark wraps the writer's errors in its own exception types
        name, message = python_error(exc)
        if name.endswith("WriteCountError"):
            return False, message
        raise LoadError(f"the write into {db} failed: {message}") from exc
    held = "the store now holds exactly these keys" if mode == "overwrite" else \
        "the store holds these keys besides its others"
    return True, (f"the tasks received {rows:,} rows and wrote {keys:,} distinct keys, as counted in the input: "
                  f"equal ({held})")


_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit|Interrupt)): (.+)$")


def python_error(exc: BaseException) -> tuple[str, str]:
    """(class name, message) of the error behind ``exc``: for an error
    raised in one of Spark's Python workers, the last line of its Python
    traceback, which Spark's exception carries in its text; else ``exc``'s
    own class and first line."""
    found = None
    for line in str(exc).splitlines():
        match = _ERROR_LINE.match(line.strip())
        if match and not match.group(1).startswith(("Py4J", "PySpark", "PythonException", "SparkException")):
            found = match
    if found is not None:
        return found.group(1), found.group(2).strip()
    text = str(exc).strip().splitlines()
    return type(exc).__name__, (text[0] if text else type(exc).__name__)
