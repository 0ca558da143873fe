"""Bulk writes through the lsmkv data source on a real local SparkSession:
append and overwrite, the duplicate-key rule (within a task, across
spilled runs, across tasks), a failed job that leaves the store as it was,
and ingested stores that pass the engines' checks."""

from __future__ import annotations

import subprocess
import sys

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
