"""The lsmkv data source on a real local SparkSession: round trips through
both engines, filter pushdown (identical results, pruned partitions) and
one clear error for bad input.

Each query reads a fresh DataFrame (``spark.read...load()``): PySpark
4.1-4.3 keep the read planned for one query on the DataFrame's relation
and reuse it for its later queries (docs/spark.md, "A Spark caveat").
"""

from __future__ import annotations

import os

import pytest

import lsmkv
import lsmkv.spark

from .conftest import contents, fill

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ENGINES = ["lsm", "btree"]


def _items(n=600):
    return {f"key{i:05d}".encode(): f"value-{i}".encode() * (1 + i % 3) for i in range(n)}


def _read(spark, path, **options):
    r = spark.read.format("lsmkv")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(path)


@pytest.mark.parametrize("engine", ENGINES)
def test_round_trip_binary_and_string(spark, tmp_path, engine):
    items = _items()
    rows = [(k, v) for k, v in items.items()]
    df = spark.createDataFrame(rows, "key binary, value binary")
    lsmkv.spark.write(df, str(tmp_path / "bin"), engine=engine, num_partitions=3)
    assert contents(str(tmp_path / "bin")) == items
    back = _read(spark, str(tmp_path / "bin")).collect()
    assert [(r.key, r.value) for r in back] == sorted(rows)

    strings = spark.createDataFrame([(k.decode(), v.decode()) for k, v in rows] + [("ké", "välue")],
                                    "key string, value string")
    strings.write.format("lsmkv").mode("append").option("engine", engine).save(str(tmp_path / "str"))
    back = _read(spark, str(tmp_path / "str"), decode="utf-8")
    assert back.schema.simpleString() == "struct<key:string,value:string>"
    got = {r.key: r.value for r in back.collect()}
    assert got == {**{k.decode(): v.decode() for k, v in items.items()}, "ké": "välue"}
    assert contents(str(tmp_path / "str"))["ké".encode()] == "välue".encode()


@pytest.fixture(scope="module")
def stores(spark, tmp_path_factory):
    """An lsm and a btree store of 4,000 keys in several tables / leaves."""
    base = tmp_path_factory.mktemp("pushdown")
    items = {f"k{i:05d}".encode(): (b"%05d" % i) * 40 for i in range(4000)}
    df = spark.createDataFrame(list(items.items()), "key binary, value binary")
    paths = {}
    for engine in ENGINES:
        path = str(base / engine)
        lsmkv.spark.write(df, path, engine=engine, num_partitions=4, targetFileBytes=32 * 1024)
        paths[engine] = path
    return paths, items


FILTERS = [
    "key = 'k00042'",
    "key IN ('k00001', 'k02000', 'k03999', 'nope')",
    "key > 'k03990'",
    "key >= 'k01000' AND key < 'k01010'",
    "key <= 'k00005'",
    "key LIKE 'k012%'",
    "key LIKE 'k012%' AND value LIKE '%1%'",
    "key > 'k00100' AND key < 'k00050'",
    "key LIKE '%99'",
    "NOT key = 'k00001' AND key < 'k00003'",
]


@pytest.mark.parametrize("engine", ENGINES)
def test_pushdown_gives_the_same_rows(spark, stores, engine):
    paths, _ = stores
    options = dict(decode="utf-8", numPartitions=4, minPartitionBytes=4096)
    everything = [(r.key, r.value) for r in _read(spark, paths[engine], pushdown="false", **options).collect()]
    assert len(everything) == 4000
    for condition in FILTERS:
        pushed = sorted((r.key, r.value) for r in
                        _read(spark, paths[engine], pushdown="true", **options).filter(condition).collect())
        plain = sorted((r.key, r.value) for r in
                       _read(spark, paths[engine], pushdown="false", **options).filter(condition).collect())
        python = sorted(spark.createDataFrame(everything, "key string, value string").filter(condition).collect())
        assert pushed == plain == [(r.key, r.value) for r in python], condition


@pytest.mark.parametrize("engine", ENGINES)
def test_binary_pushdown_and_pruning(spark, stores, engine):
    from pyspark.sql.functions import col, lit
    paths, items = stores
    options = dict(numPartitions=4, minPartitionBytes=4096, pushdown="true")
    assert _read(spark, paths[engine], **options).rdd.getNumPartitions() == 4
    point = _read(spark, paths[engine], **options).filter(col("key") == lit(b"k02500"))
    assert point.rdd.getNumPartitions() == 1
    assert [(r.key, r.value) for r in
            _read(spark, paths[engine], **options).filter(col("key") == lit(b"k02500")).collect()] == \
        [(b"k02500", items[b"k02500"])]
    # Far-apart points: few bytes to read, so one partition (the size cap) reads both.
    two = _read(spark, paths[engine], **options).filter(col("key").isin(b"k00000", b"k03999"))
    assert two.rdd.getNumPartitions() == 1
    assert sorted(r.key for r in _read(spark, paths[engine], **options)
                  .filter(col("key").isin(b"k00000", b"k03999")).collect()) == [b"k00000", b"k03999"]
    # A range over part of the store reads only the partitions that hold it.
    half = _read(spark, paths[engine], **options).filter(col("key") < lit(b"k01900"))
    assert 1 <= half.rdd.getNumPartitions() < 4
    assert _read(spark, paths[engine], **options).filter(col("key") < lit(b"k01900")).count() == 1900


def test_consistent_read_cleans_its_checkpoints(spark, stores, tmp_path):
    paths, _ = stores
    ckpt = str(tmp_path / "ckpts")
    df = _read(spark, paths["lsm"], numPartitions=4, minPartitionBytes=4096, checkpointDir=ckpt)
    assert df.count() == 4000
    assert len([n for n in os.listdir(ckpt) if not n.endswith(".lock")]) == 1
    assert len(lsmkv.spark.remove_checkpoints(paths["lsm"], checkpoint_dir=ckpt)) == 1
    assert not os.path.exists(ckpt)
    # Reads of the unchanged store share one checkpoint, whatever the retention.
    assert _read(spark, paths["lsm"], numPartitions=4, minPartitionBytes=4096, checkpointDir=ckpt).count() == 4000
    assert _read(spark, paths["lsm"], numPartitions=4, minPartitionBytes=4096, checkpointDir=ckpt,
                 checkpointRetention=0).count() == 4000
    assert len([n for n in os.listdir(ckpt) if not n.endswith(".lock")]) == 1


def _error(excinfo) -> str:
    return str(excinfo.value)


def test_bad_input_gives_one_clear_error(spark, tmp_path):
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError
    errors = (PySparkException, Py4JJavaError, ValueError)
    good = spark.createDataFrame([(b"a", b"1")], "key binary, value binary")

    with pytest.raises(errors, match="no key column"):
        spark.createDataFrame([(b"a", b"1")], "k binary, value binary").write.format("lsmkv").mode("append").save(
            str(tmp_path / "x"))
    with pytest.raises(errors, match="column value is int"):
        spark.createDataFrame([(b"a", 1)], "key binary, value int").write.format("lsmkv").mode("append").save(str(tmp_path / "x"))
    with pytest.raises(errors, match="engine must be one of lsm, btree, not 'rocks'"):
        good.write.format("lsmkv").mode("append").option("engine", "rocks").save(str(tmp_path / "x"))
    with pytest.raises(errors, match="unknown write option"):
        good.write.format("lsmkv").mode("append").option("enigne", "lsm").save(str(tmp_path / "x"))
    with pytest.raises(errors, match="null"):
        spark.createDataFrame([(b"a", None)], "key binary, value binary").write.format("lsmkv").mode("append").save(
            str(tmp_path / "x"))
    (tmp_path / "notastore").mkdir()
    (tmp_path / "notastore" / "file.txt").write_text("hello")
    with pytest.raises(errors, match="not an lsmkv or btree database"):
        _read(spark, str(tmp_path / "notastore")).collect()
    with pytest.raises(errors, match="not an lsmkv or btree store"):
        _read(spark, str(tmp_path / "missing")).collect()
    fill(str(tmp_path / "lsmstore"), "lsm", {b"a": b"1"})
    with pytest.raises(errors, match="is a lsm store, not a btree store"):
        _read(spark, str(tmp_path / "lsmstore"), engine="btree").collect()
    with pytest.raises(errors, match="engine must be one of"):
        _read(spark, str(tmp_path / "lsmstore"), engine="rocks").collect()
    with pytest.raises(errors, match="option numPartitions must be an integer"):
        _read(spark, str(tmp_path / "lsmstore"), numPartitions="many").collect()
    assert os.listdir(tmp_path / "notastore") == ["file.txt"]
    assert not os.path.exists(tmp_path / "x")


@pytest.mark.xfail(strict=True, reason="PySpark 4.1-4.3 keep the read planned by filter pushdown on the "
                   "DataFrame's relation and reuse it for the DataFrame's later queries (upstream fixed by "
                   "scoping it to the scan, PythonScanBuilder); when this passes, drop the caveat in docs/spark.md")
def test_spark_reuses_a_pushed_down_read_on_the_same_dataframe(spark, stores):
    from pyspark.sql.functions import col, lit
    paths, _ = stores
    df = _read(spark, paths["lsm"], pushdown="true")
    assert df.filter(col("key") == lit(b"k00001")).count() == 1
    assert df.count() == 4000


def test_by_default_a_reused_dataframe_counts_right(spark, stores):
    """pushdown is off unless asked for, because of the Spark bug above: a
    DataFrame reused after a filtered query must still read everything."""
    from pyspark.sql.functions import col, lit
    paths, _ = stores
    df = _read(spark, paths["lsm"])
    assert df.filter(col("key") == lit(b"k00001")).count() == 1
    assert df.count() == 4000
