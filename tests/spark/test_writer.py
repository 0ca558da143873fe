"""Bulk writes through the lsmkv data source on a real local SparkSession:
append and overwrite, the duplicate-key rule (within a task, across
spilled runs, across tasks), a failed job that leaves the store as it was,
a driver killed mid-write whose staging directory the next write removes,
and ingested stores that pass the engines' checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import lsmkv
import lsmkv.spark

from .conftest import contents, fill, leftovers

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ENGINES = ["lsm", "btree"]


def _df(spark, rows, partitions=None):
    df = spark.createDataFrame(rows, "key binary, value binary")
    return df.repartition(partitions) if partitions else df


@pytest.mark.parametrize("engine", ENGINES)
def test_append_new_values_win_and_overwrite_replaces(spark, tmp_path, engine):
    path = str(tmp_path / "db")
    fill(path, engine, {b"a": b"old", b"b": b"old", b"c": b"old"})
    _df(spark, [(b"b", b"new"), (b"d", b"new")]).write.format("lsmkv").mode("append").save(path)
    assert contents(path) == {b"a": b"old", b"b": b"new", b"c": b"old", b"d": b"new"}
    lsmkv.spark.write(_df(spark, [(b"x", b"1"), (b"b", b"2")]), path, mode="overwrite")
    assert contents(path) == {b"x": b"1", b"b": b"2"}
    assert leftovers(str(tmp_path)) == []
    # An empty DataFrame: append changes nothing, overwrite empties the store.
    lsmkv.spark.write(_df(spark, []), path)
    assert contents(path) == {b"x": b"1", b"b": b"2"}
    lsmkv.spark.write(_df(spark, []), path, mode="overwrite")
    assert contents(path) == {}
    assert leftovers(str(tmp_path)) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_duplicate_keys_greatest_value_wins(spark, tmp_path, engine):
    # 3,000 keys, each written 1-4 times with different values, scattered
    # over 4 tasks that overlap (no range partitioning), with a sort buffer
    # so small that every task spills several runs.
    import random
    rng = random.Random(7)
    rows, expected = [], {}
    for i in range(3000):
        key = b"key%05d" % rng.randrange(2000)
        value = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
        rows.append((key, value))
        expected[key] = max(expected.get(key, b""), value) if key in expected else value
    rng.shuffle(rows)
    path = str(tmp_path / "db")
    (_df(spark, rows, partitions=4).write.format("lsmkv").mode("append").option("engine", engine)
     .option("taskSortBufferBytes", 4096).option("targetFileBytes", 8192).save(path))
    assert contents(path) == expected
    # The same rows in another order and partitioning give the same store.
    rng.shuffle(rows)
    lsmkv.spark.write(_df(spark, rows, partitions=3), str(tmp_path / "db2"), engine=engine, num_partitions=2)
    assert contents(str(tmp_path / "db2")) == expected
    assert leftovers(str(tmp_path)) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_failed_job_leaves_the_store_untouched(spark, tmp_path, engine, directory_bytes):
    from pyspark.sql.functions import col, udf

    path = str(tmp_path / "db")
    fill(path, engine, {b"a": b"1", b"b": b"2"})
    before = directory_bytes(path)

    @udf("binary")
    def explode(v):
        if v == b"boom":
            raise RuntimeError("task failure on purpose")
        return v

    rows = [(b"k%04d" % i, b"v") for i in range(500)] + [(b"zz", b"boom")]
    df = _df(spark, rows, partitions=3).withColumn("value", explode(col("value")))
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="task failure on purpose"):
            df.write.format("lsmkv").mode(mode).option("engine", engine).save(path)
        assert directory_bytes(path) == before
        assert leftovers(str(tmp_path)) == []
    assert contents(path) == {b"a": b"1", b"b": b"2"}


@pytest.mark.parametrize("engine", ENGINES)
def test_ingested_store_passes_check(spark, tmp_path, engine):
    rows = [(b"%08d" % (i * 7919 % 20000), b"value-%d" % i) for i in range(20000)]
    path = str(tmp_path / "db")
    lsmkv.spark.write(_df(spark, rows, partitions=4), path, engine=engine, num_partitions=4)
    lsmkv.spark.write(_df(spark, rows[:5000], partitions=2), path, engine=engine)  # unsorted append: merged
    result = subprocess.run([sys.executable, "-m", "lsmkv.cli", "check", path], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"OK: {path} ({engine})" in result.stdout
    assert len(contents(path)) == 20000


_STALLING_DRIVER = textwrap.dedent("""
    import os, sys, time
    import lsmkv.spark
    from pyspark.sql.functions import col, udf

    store, marker, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    spark = lsmkv.spark.session(master="local[2]", **{"spark.sql.execution.arrow.maxRecordsPerBatch": "100"})

    @udf("string")
    def value(n):
        if n % rows == rows - 1:  # the last row of each partition: wait here until the driver is killed
            open(marker, "a").close()
            parent = os.getppid()
            while os.getppid() == parent:
                time.sleep(0.2)
            os._exit(1)
        return "v%08d" % n + "x" * 100

    df = spark.range(0, 2 * rows, numPartitions=2).select(col("id").cast("string").alias("key"),
                                                          value(col("id")).alias("value"))
    df.write.format("lsmkv").mode("append").option("taskSortBufferBytes", 4096).save(store)
""")


def _wait_for(condition, what, timeout=600):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


@pytest.mark.crash
def test_a_killed_driver_leaves_a_staging_directory_the_next_write_removes(spark, tmp_path):
    from lsmkv.spark.owners import Owner

    store = str(tmp_path / "db")
    marker = str(tmp_path / "stalled")
    script = tmp_path / "driver.py"
    script.write_text(_STALLING_DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), store, marker, "3000"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        def staged_tables():
            return [os.path.join(tmp_path, d, f) for d in leftovers(str(tmp_path))
                    for f in os.listdir(tmp_path / d) if f.endswith(".sst")]
        _wait_for(lambda: os.path.exists(marker) and staged_tables(), "the tasks to write table files")
        (staging_dir,) = leftovers(str(tmp_path))
        jvm = Owner.read(str(tmp_path / staging_dir))
        assert jvm is not None and jvm.alive() is True and jvm.pid != driver.pid  # the driver's JVM owns it
        # The driver dies: its Python process and its JVM, with no time to abort.
        os.kill(driver.pid, signal.SIGKILL)
        os.kill(jvm.pid, signal.SIGKILL)
        driver.wait()
        _wait_for(lambda: jvm.alive() is False, "the JVM to be gone", timeout=60)
        assert leftovers(str(tmp_path)) == [staging_dir] and staged_tables()
        assert not os.path.exists(store)  # nothing was ingested
        lsmkv.spark.write(_df(spark, [(b"a", b"1")]), store)
        assert leftovers(str(tmp_path)) == []
        assert contents(store) == {b"a": b"1"}
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
