"""The Spark jobs: ``lsmkv spark load`` (jobs.py) from Parquet, CSV and
JSON with its count check (made by the write's commit from what the tasks
report, and failing when they disagree with the input's counts), and
``lsmkv spark bench`` (bench/suites/spark.py) at a tiny size writing results the bench
tooling reads. They run in-process on the tests' SparkSession
(``session()`` returns the running one)."""

from __future__ import annotations

import json
import os

import pytest

from lsmkv.spark import jobs

from .conftest import contents, fill, leftovers

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_load_each_format_with_count_check(spark, tmp_path, fmt):
    rows = [(f"user{i % 300}", i, f"name-{i}") for i in range(1000)]  # 300 distinct keys
    df = spark.createDataFrame(rows, "id string, n long, name string")
    source = str(tmp_path / f"input.{fmt}")
    getattr(df.coalesce(2).write.mode("overwrite"), fmt)(source, **({"header": True} if fmt == "csv" else {}))
    lines = []
    result = jobs.load(spark, source, key_col="id", value_col="n", db=str(tmp_path / "db"), engine="lsm",
                       progress=lines.append)
    assert result.ok and result.distinct_keys == 300 and result.input_rows == 1000
    stored = contents(str(tmp_path / "db"))
    assert len(stored) == 300
    # The duplicate rule: of user7's values 7, 307, 607, 907 the greatest in byte order ("907").
    assert stored[b"user7"] == b"907"
    assert any("the tasks received 1,000 rows and wrote 300 distinct keys, as counted in the input: equal" in line
               for line in lines)
    # Append of overlapping keys: before + new keys.
    more = spark.createDataFrame([("user1", 5, "x"), ("new", 1, "y")], "id string, n long, name string")
    more_path = str(tmp_path / "more.parquet")
    more.write.mode("overwrite").parquet(more_path)
    again = jobs.load(spark, more_path, key_col="id", value_col="name", db=str(tmp_path / "db"), engine="lsm")
    assert again.ok and again.input_rows == again.distinct_keys == 2
    after = contents(str(tmp_path / "db"))
    assert len(after) == 301 and after[b"user1"] == b"x" and after[b"new"] == b"y"


def test_count_check_fails_when_the_tasks_disagree_with_the_input(spark, tmp_path, directory_bytes):
    """The input changes between the job's count and its write (a source
    that is read again: here a UDF that reads a file), so the tasks receive
    other rows than were counted: the commit refuses, the store is as it
    was, and the job reports the failed check with both counts."""
    from pyspark.sql.functions import col, udf

    db = str(tmp_path / "db")
    fill(db, "lsm", {b"old": b"1"})
    before = directory_bytes(db)
    changed = str(tmp_path / "changed")

    @udf("string")
    def key_of(n):
        # Once the file exists, keys 0-99 collapse into one: 100 fewer distinct keys.
        return "k0" if os.path.exists(changed) and n < 100 else f"k{n}"

    frame = spark.range(1000).select(key_of(col("id")).alias("key"), col("id").cast("string").alias("value"))
    rows, keys = frame.count(), frame.select("key").distinct().count()
    assert (rows, keys) == (1000, 1000)
    open(changed, "w").close()
    ok, check = jobs.write_checked(frame, db, engine="lsm", mode="append", num_partitions=2, rows=rows, keys=keys)
    assert not ok
    assert "its tasks wrote 901 distinct keys where 1,000 were expected (option expectedKeys)" in check
    assert "the store is unchanged" in check
    assert directory_bytes(db) == before
    assert leftovers(str(tmp_path)) == []
    # The same frame with the counts it now has commits.
    ok, check = jobs.write_checked(frame, db, engine="lsm", mode="append", num_partitions=2, rows=1000, keys=901)
    assert ok and len(contents(db)) == 902


def test_load_bad_input(spark, tmp_path):
    source = str(tmp_path / "input.parquet")
    spark.createDataFrame([("a", 1)], "id string, n long").write.parquet(source)
    with pytest.raises(jobs.LoadError, match="--key-col key: the input has no such column .*columns: id, n"):
        jobs.load(spark, source, key_col="key", value_col="n", db=str(tmp_path / "db"), engine="lsm")
    with pytest.raises(jobs.LoadError, match="cannot tell the format"):
        jobs.load(spark, str(tmp_path / "input.bin"), key_col="id", value_col="n", db=str(tmp_path / "db"),
                  engine="lsm")
    assert not os.path.exists(tmp_path / "db")


def test_bench_writes_results_the_bench_tools_read(spark, tmp_path):
    from bench.results import load_results
    from lsmkv.cli import spark_main as main
    out = str(tmp_path / "out")
    assert main(["bench", "--rows", "3000", "--engine", "lsm,btree", "--read-tasks", "2", "--read-ops", "200",
                 "--out", out, "--dir", str(tmp_path / "work"), "--quiet"]) == 0
    doc = load_results(out)
    got = {(r["engine"], r["workload"]) for r in doc["runs"]}
    assert got == {(e, w) for e in ("lsm", "btree")
                   for w in ("spark-ingest", "spark-put-loop", "spark-read", "spark-full-read")}
    for r in doc["runs"]:
        assert r["family"] == "spark" and r["operations"] > 0 and r["ops_per_sec"] > 0
    reads = [r for r in doc["runs"] if r["workload"] == "spark-read"]
    assert all(r["found"] == r["gets"] for r in reads)  # every key asked for exists
    assert os.path.exists(os.path.join(out, "report.md"))
    with open(os.path.join(out, "results.json")) as f:
        assert json.load(f)["tables"][0]["columns"][4] == "ingest / put"


def test_cli_usage_errors_are_one_line(tmp_path):
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "lsmkv.cli", "spark", "load", "--input", "x.csv", "--key-col", "id"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "lsmkv spark load: error: the following arguments are required: --value-col, --db "
        "(see lsmkv spark load --help)"]
    assert "pyspark" not in subprocess.run(
        [sys.executable, "-c", "import sys, lsmkv, lsmkv.spark; print(sorted(m for m in sys.modules if 'pyspark' in m))"],
        capture_output=True, text=True).stdout.replace("[]", "")
