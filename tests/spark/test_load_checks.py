"""``lsmkv spark load`` checks its request before Spark starts: a store of
the other engine, a missing input, a path that is not a store or cannot be
created, an input of unknown format -- each is one line on stderr, exit 1,
without importing pyspark (so without starting a JVM or reading the input)
and without touching the store."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lsmkv.spark import jobs

from .conftest import fill

_RUN = textwrap.dedent("""
    import sys
    from lsmkv.spark.cli import main
    rc = main(sys.argv[1:])
    print(rc, "pyspark" in sys.modules)
""")


def _load(*args: str) -> tuple[str, list[str]]:
    """Run ``lsmkv spark load ARGS`` in a child process: (its stdout, its stderr lines)."""
    result = subprocess.run([sys.executable, "-c", _RUN, "load", *args], capture_output=True, text=True, timeout=120)
    return result.stdout.strip(), result.stderr.strip().splitlines()


@pytest.mark.subprocess
def test_each_bad_request_is_one_line_before_spark_starts(tmp_path, directory_bytes):
    data = tmp_path / "events.parquet"
    data.write_bytes(b"PAR1")  # never read: the checks look only at its name and that it exists
    btree_store = str(tmp_path / "BTREE_STORE")
    fill(btree_store, "btree", {b"a": b"1"})
    before = directory_bytes(btree_store)
    (tmp_path / "notastore").mkdir()
    (tmp_path / "notastore" / "notes.txt").write_text("x")
    (tmp_path / "afile").write_text("x")
    common = ["--key-col", "id", "--value-col", "payload"]
    cases = [
        (["--input", str(data), "--engine", "lsm", "--db", btree_store],
         f"lsmkv spark: error: --db {btree_store} is a btree store; a load with --engine lsm cannot append to it "
         f"(give --engine btree, or --mode overwrite to replace it with an lsm store)"),
        (["--input", str(tmp_path / "missing.parquet"), "--engine", "lsm", "--db", str(tmp_path / "new")],
         f"lsmkv spark: error: --input {tmp_path / 'missing.parquet'}: no such file or directory"),
        (["--input", str(data), "--engine", "lsm", "--db", str(tmp_path / "notastore")],
         f"lsmkv spark: error: {tmp_path / 'notastore'} is a non-empty directory that is not an lsmkv or btree "
         f"database (it holds e.g. 'notes.txt'); choose an empty or new directory"),
        (["--input", str(data), "--engine", "lsm", "--db", str(tmp_path / "afile" / "db")],
         f"lsmkv spark: error: --db {tmp_path / 'afile' / 'db'}: cannot create it ({tmp_path / 'afile'} is not a "
         f"writable directory)"),
        (["--input", str(tmp_path / "events.bin"), "--engine", "lsm", "--db", str(tmp_path / "new")],
         f"lsmkv spark: error: cannot tell the format of {tmp_path / 'events.bin'} from its name; "
         f"give --format parquet|csv|json"),
    ]
    for args, error in cases:
        out, err = _load(*args, *common)
        assert (out, err) == ("1 False", [error]), args
    assert directory_bytes(btree_store) == before
    assert not os.path.exists(tmp_path / "new")


def test_check_request_accepts_what_a_load_can_do(tmp_path):
    data = tmp_path / "part-0.csv"
    data.write_text("id,v\n")
    fill(str(tmp_path / "lsmstore"), "lsm", {b"a": b"1"})
    # A new store (parents created), the store's own engine, an overwrite
    # that changes the engine, a glob and a file: URI for the input, and a
    # URI of another file system (left to Spark).
    assert jobs.check_request(str(data), None, str(tmp_path / "a" / "b" / "db"), "btree", "append") == "csv"
    assert jobs.check_request(str(data), None, str(tmp_path / "lsmstore"), "lsm", "append") == "csv"
    assert jobs.check_request(str(data), None, str(tmp_path / "lsmstore"), "btree", "overwrite") == "csv"
    assert jobs.check_request(str(tmp_path / "part-*.csv"), "csv", str(tmp_path / "db"), "lsm", "append") == "csv"
    assert jobs.check_request(f"file://{data}", None, str(tmp_path / "db"), "lsm", "append") == "csv"
    assert jobs.check_request("hdfs://namenode/in/x.parquet", None, str(tmp_path / "db"), "lsm", "append") == "parquet"
    with pytest.raises(jobs.LoadError, match=r"--input .*part-\*\.json: no such file"):
        jobs.check_request(str(tmp_path / "part-*.json"), None, str(tmp_path / "db"), "lsm", "append")
    # Without --engine a load writes the existing store's engine, else lsm.
    assert jobs.engine_for(str(tmp_path / "lsmstore"), None) == "lsm"
    fill(str(tmp_path / "btreestore"), "btree", {b"a": b"1"})
    assert jobs.engine_for(str(tmp_path / "btreestore"), None) == "btree"
    assert jobs.engine_for(str(tmp_path / "nothing-yet"), None) == "lsm"
    assert jobs.engine_for(str(tmp_path / "btreestore"), "lsm") == "lsm"
    with pytest.raises(jobs.LoadError, match="--engine must be one of lsm, btree, not 'rocks'"):
        jobs.check_request(str(data), None, str(tmp_path / "db"), "rocks", "append")
