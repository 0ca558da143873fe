"""lsmkv on Spark: the ``lsmkv`` data source (read a store as a DataFrame,
write a DataFrame into a store by bulk ingest) and the Spark batch jobs
(``lsmkv spark load``, ``lsmkv spark bench``). docs/spark.md is the guide.

    import lsmkv.spark
    spark = lsmkv.spark.session()                       # local[2], source registered
    df = spark.read.format("lsmkv").load("/data/db")     # key, value: binary
    lsmkv.spark.write(df, "/data/copy", engine="btree")  # range-partitioned bulk ingest

Modules: ``sessions.py`` (the session and registration), ``source.py`` (the
DataSource), ``options.py``, ``reader.py`` (partitions and reads),
``filters.py`` (pushdown), ``ranges.py`` (key range algebra),
``checkpoints.py`` (consistent reads), ``writer.py`` (tasks, commit,
abort), ``task_output.py`` (a task's rows into table files),
``staging.py`` (a write's staging directory), ``owners.py`` (the driver
process that owns a job's files), ``runs.py`` (sorting, merging and the
duplicate-key rule), ``ingest.py`` (the commit's merge and ingest),
``store.py`` (engines), ``jobs.py`` (the load job), ``cli.py``. The
benchmark is a suite of the bench (bench/suites/spark.py).

PySpark is an optional extra (``pip install lsmkv[spark]``): it is imported
only when a function here is called, never by ``import lsmkv``. The
engines never import this package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "session", "write", "remove_checkpoints"]


def register(spark: Any) -> None:
    """Register format "lsmkv" with a SparkSession (sessions.py)."""
    from .sessions import register as _register
    _register(spark)


def session(app_name: str = "lsmkv", master: str = "local[2]", **conf: Any) -> Any:
    """A SparkSession (``getOrCreate``) with the worker interpreter set to
    this one and format "lsmkv" registered; a local master gets its cores
    as the default parallelism, a cluster master Spark's own (sessions.py)."""
    from .sessions import session as _session
    return _session(app_name=app_name, master=master, **conf)


def write(df: Any, path: str, *, engine: str | None = None, mode: str = "append",
          num_partitions: int | None = None, **options: Any) -> None:
    """Bulk-load ``df`` (columns key and value, binary or string) into the
    store at ``path``: range-partition by key and sort within partitions
    first, so every task writes a key range of its own and the commit
    ingests the files as they are (no merge). ``mode``: "append" (new
    values win over the store's) or "overwrite" (the store is replaced).
    ``options`` are the writer's options (docs/spark.md)."""
    from .store import check_engine
    check_engine(engine)
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    n = num_partitions or df.sparkSession.sparkContext.defaultParallelism
    ordered = df.repartitionByRange(int(n), "key").sortWithinPartitions("key", "value")
    w = ordered.write.format("lsmkv").mode(mode)
    if engine is not None:
        w = w.option("engine", engine)
    for name, value in options.items():
        w = w.option(name, str(value))
    w.save(path)


def remove_checkpoints(path: str, *, checkpoint_dir: str | None = None, older_than: float = 0.0) -> list[str]:
    """Remove the read checkpoints of the store at ``path`` (in
    ``checkpoint_dir``, default beside the store) last used more than
    ``older_than`` seconds ago that no partition is reading (checkpoints.py)."""
    from .checkpoints import default_dir
    from .checkpoints import remove_checkpoints as _remove
    return _remove(checkpoint_dir or default_dir(path), older_than)
