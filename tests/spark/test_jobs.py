"""The Spark jobs: ``lsmkv spark load`` (jobs.py) from Parquet, CSV and
JSON with its count check, and ``lsmkv spark bench`` (bench.py) at a tiny
size writing results the bench tooling reads. They run in-process on the
tests' SparkSession (``session()`` returns the running one)."""

from __future__ import annotations

import json
import os

import pytest

from lsmkv.spark import jobs

from .conftest import contents

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
    assert result.ok and result.distinct_keys == result.keys_after == 300 and result.input_rows == 1000
    stored = contents(str(tmp_path / "db"))
    # The duplicate rule: of user7's values 7, 307, 607, 907 the greatest in byte order ("907").
    assert stored[b"user7"] == b"907"
    assert any("distinct input keys 300, keys in the store 300: equal" in line for line in lines)
    # Append of overlapping keys: before + new keys.
    more = spark.createDataFrame([("user1", 5, "x"), ("new", 1, "y")], "id string, n long, name string")
    more_path = str(tmp_path / "more.parquet")
    more.write.mode("overwrite").parquet(more_path)
    again = jobs.load(spark, more_path, key_col="id", value_col="name", db=str(tmp_path / "db"), engine="lsm")
    assert again.ok and again.keys_before == 300 and again.keys_after == 301
    assert contents(str(tmp_path / "db"))[b"user1"] == b"x"


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
    from lsmkv.spark.cli import main
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
