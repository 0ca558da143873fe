"""Spark: bulk ingest through the Spark data source against the put loop,
then parallel reads, for each engine, in one run (``lsmkv bench --suite
spark``, also ``lsmkv spark bench``; docs/spark.md has the figures).

1. Generate ``--rows`` rows (16-byte keys and 100-byte values, both from
   SHA-256 of the row number: random-looking, incompressible, the same in
   every run) as Parquet in the work directory, once.
2. Warm up (untimed): a small ingest and read per engine, so the first
   timed job does not pay for starting Spark's Python workers.
3. For each engine, in the same run:

   * ``spark-ingest``: ``lsmkv.spark.write`` of the Parquet data into a new
     store (range partitioning, sorted table files, one ingest), timed
     from the start of the Spark job to the ingest's return;
   * ``spark-put-loop``: one Python process reads the same Parquet file in
     batches of 1,000 rows and writes each as a ``write_batch`` of 1,000
     puts, timed until the store is closed;
   * ``spark-read``: ``--read-tasks`` Spark tasks each open the ingested
     store read-only and issue ``--read-ops`` operations, 90 % gets of
     random existing keys and 10 % short scans (seek + ``--scan-length``
     entries); rate = all operations / wall time of the job;
   * ``spark-full-read``: every row back through the data source
     (``spark.read.format("lsmkv")``), summing the value lengths.

The runs land in ``results.json`` / ``results.csv`` / ``report.md`` of
``--out`` in the format of ``lsmkv bench --suite`` (family ``spark``), so
``lsmkv bench compare`` and the report read them. It never prints:
``rec.progress`` carries the lines. pyspark is imported only when the suite
runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time
from typing import Any

from . import engine_list

NAME = "spark"
DESCRIPTION = ("Spark bulk ingest against the put loop (write_batch of 1,000) into each engine, "
               "then parallel gets/scans in Spark tasks and a full read back through the data source")

ENGINES = ("lsm", "btree")
KEY_SIZE = 16
VALUE_SIZE = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows to load (1000000)")
    parser.add_argument("--engine", "--engines", dest="engines", type=engine_list(ENGINES), default="lsm,btree",
                        help="engines, comma-separated (lsm,btree)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="Spark partitions of the ingest (default: the default parallelism)")
    parser.add_argument("--read-tasks", type=int, default=4, help="Spark tasks of the read workload (4)")
    parser.add_argument("--read-ops", type=int, default=20_000, help="operations per read task (20000)")
    parser.add_argument("--scan-length", type=int, default=10, help="entries per short scan (10)")
    parser.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    parser.add_argument("--dir", default=None, help="work directory for the data and the stores "
                                                    "(default: a temporary directory, removed afterwards)")


def key_of(i: int) -> bytes:
    """Row i's key, as the generated DataFrame has it."""
    return hashlib.sha256(str(i).encode()).digest()[:KEY_SIZE]


def generate(spark: Any, rows: int, path: str, partitions: int) -> None:
    from pyspark.sql import functions as F
    ident = F.col("id").cast("string")
    key = F.unhex(F.substring(F.sha2(ident, 256), 1, 2 * KEY_SIZE))
    value = F.substring(F.unhex(F.concat(*[F.sha2(F.concat(F.lit(p), ident), 256) for p in "vwxy"])), 1,
                        VALUE_SIZE)
    (spark.range(0, rows, numPartitions=partitions).select(key.alias("key"), value.alias("value"))
     .write.mode("overwrite").parquet(path))


def put_loop(data: str, path: str, engine: str, batch_rows: int = 1000) -> tuple[int, float]:
    """Rows written and seconds, the put path: write_batch of ``batch_rows`` puts."""
    import pyarrow.parquet as pq

    from lsmkv.spark.store import open_store
    files = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".parquet"))
    rows = 0
    t0 = time.perf_counter()
    db = open_store(path, engine)
    try:
        for file in files:
            for batch in pq.ParquetFile(file).iter_batches(batch_size=batch_rows, columns=["key", "value"]):
                keys = batch.column(0).to_pylist()
                values = batch.column(1).to_pylist()
                with db.write_batch() as b:
                    for k, v in zip(keys, values):
                        b.put(k, v)
                rows += len(keys)
    finally:
        db.close()
    return rows, time.perf_counter() - t0


def _read_task(path: str, engine: str, rows: int, ops: int, scan_length: int, seed: int):
    """One Spark task of the read workload (runs on an executor)."""
    import random

    from lsmkv.spark.store import open_store
    rng = random.Random(seed)
    gets = found = scans = entries = 0
    t0 = time.perf_counter()
    with open_store(path, engine, read_only=True) as db:
        for _ in range(ops):
            key = key_of(rng.randrange(rows))
            if rng.random() < 0.9:
                gets += 1
                found += db.get(key) is not None
            else:
                scans += 1
                with db.iterator(lower_bound=key) as it:
                    it.seek_to_first()
                    n = 0
                    while it.valid() and n < scan_length:
                        it.next()
                        n += 1
                    entries += n
    return gets, found, scans, entries, time.perf_counter() - t0


def read_workload(spark: Any, path: str, engine: str, rows: int, tasks: int, ops: int,
                  scan_length: int) -> dict[str, Any]:
    sc = spark.sparkContext
    t0 = time.perf_counter()
    results = (sc.parallelize(range(tasks), tasks)
               .map(lambda i: _read_task(path, engine, rows, ops, scan_length, 1000 + i)).collect())
    wall = time.perf_counter() - t0
    gets, found, scans, entries = (sum(r[i] for r in results) for i in range(4))
    return {"operations": gets + scans, "seconds": wall, "gets": gets, "found": found, "scans": scans,
            "scan_entries": entries, "threads": tasks,
            "task_seconds": [round(r[4], 3) for r in results]}


def full_read(spark: Any, path: str) -> tuple[int, float]:
    from pyspark.sql import functions as F
    t0 = time.perf_counter()
    row = spark.read.format("lsmkv").load(path).agg(F.count("*").alias("n"),
                                                      F.sum(F.length("value")).alias("b")).collect()[0]
    return int(row["n"]), time.perf_counter() - t0


def _disk_bytes(path: str) -> int:
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(root, n))
            except OSError:
                pass
    return total


def _levels(path: str, engine: str) -> Any:
    if engine != "lsm":
        return None
    from lsmkv.spark.store import open_store
    with open_store(path, engine, read_only=True) as db:
        levels = db.stats().get("levels")
    if not isinstance(levels, list):
        return None
    return [{k: row.get(k) for k in ("level", "files", "bytes") if k in row} for row in levels
            if isinstance(row, dict) and row.get("files")]


def run(args: argparse.Namespace, rec: Any) -> None:
    from lsmkv.spark import session, write
    from lsmkv.spark.store import check_engine
    engines = args.engines
    for e in engines:
        check_engine(e)
    spark = session(app_name="lsmkv-spark-bench", master=args.master)
    parallelism = spark.sparkContext.defaultParallelism
    partitions = args.partitions or parallelism
    own = args.dir is None
    work = args.dir or tempfile.mkdtemp(prefix="lsmkv-spark-bench-")
    os.makedirs(work, exist_ok=True)
    try:
        data = os.path.join(work, "input.parquet")
        rec.progress(f"generating {args.rows:,} rows ({KEY_SIZE}-byte keys, {VALUE_SIZE}-byte values) into {data}")
        generate(spark, args.rows, data, partitions)
        # Untimed warm-up: the first Spark job of a session pays for starting
        # Python workers, imports and the JVM's JIT (about 15 s here), which
        # is not ingest work.
        rec.progress("warm-up: a small ingest and read per engine (untimed)")
        sample = spark.read.parquet(data).limit(max(1000, args.rows // 100))
        for engine in engines:
            scratch = os.path.join(work, f"{engine}-warmup")
            write(sample, scratch, engine=engine, mode="overwrite", num_partitions=partitions)
            full_read(spark, scratch)
            shutil.rmtree(scratch, ignore_errors=True)
        summary = []
        for engine in engines:
            ingested = os.path.join(work, f"{engine}-ingest")
            looped = os.path.join(work, f"{engine}-puts")
            for p in (ingested, looped):
                shutil.rmtree(p, ignore_errors=True)

            rec.progress(f"{engine}: bulk ingest through Spark ({partitions} partitions)")
            t0 = time.perf_counter()
            write(spark.read.parquet(data), ingested, engine=engine, mode="overwrite", num_partitions=partitions)
            ingest_s = time.perf_counter() - t0
            ingest = rec.run(engine, "spark-ingest", args.rows, ingest_s, disk_bytes=_disk_bytes(ingested),
                             partitions=partitions, levels=_levels(ingested, engine))

            rec.progress(f"{engine}: the put loop (one process, write_batch of 1,000 puts)")
            rows, put_s = put_loop(data, looped, engine)
            puts = rec.run(engine, "spark-put-loop", rows, put_s, disk_bytes=_disk_bytes(looped),
                           levels=_levels(looped, engine))
            shutil.rmtree(looped, ignore_errors=True)

            rec.progress(f"{engine}: {args.read_tasks} Spark tasks x {args.read_ops:,} gets and short scans")
            r = read_workload(spark, ingested, engine, args.rows, args.read_tasks, args.read_ops, args.scan_length)
            reads = rec.run(engine, "spark-read", r.pop("operations"), r.pop("seconds"), **r)

            rec.progress(f"{engine}: full read back through the data source")
            n, read_s = full_read(spark, ingested)
            full = rec.run(engine, "spark-full-read", n, read_s)
            ratio = (ingest["ops_per_sec"] or 0) / puts["ops_per_sec"] if puts["ops_per_sec"] else None
            summary.append([engine, args.rows, ingest["ops_per_sec"], puts["ops_per_sec"], ratio,
                            reads["ops_per_sec"], full["ops_per_sec"]])
            shutil.rmtree(ingested, ignore_errors=True)
        rec.table("Spark bulk ingest against the put loop (rows/s), parallel reads (ops/s), full read (rows/s)",
                  ["engine", "rows", "spark-ingest", "spark-put-loop", "ingest / put", "spark-read",
                   "spark-full-read"], summary,
                  note=f"{args.master}, {partitions} ingest partitions, {args.read_tasks} read tasks")
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
