"""lsmkv.spark on a real standalone Spark cluster: a master and a worker
of 3 cores started with the pyspark distribution's ``spark-class``, and a
driver process that connects with ``lsmkv.spark.session(master=
"spark://...")``. The session takes the cluster's parallelism (3, not a
fixed 2), writes with that many tasks and reads with that many partitions,
and the executors' Python workers import the lsmkv under test."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import lsmkv

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CORES = 3

_DRIVER = textwrap.dedent("""
    import json, sys
    import lsmkv, lsmkv.spark

    master, store = sys.argv[1], sys.argv[2]
    spark = lsmkv.spark.session(master=master)
    sc = spark.sparkContext
    out = {"parallelism": sc.defaultParallelism,
           "parallelism_set": sc.getConf().contains("spark.default.parallelism"),
           "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
           "task_lsmkv": sc.parallelize([0], 1).map(lambda _: __import__("lsmkv").__file__).collect()[0]}
    rows = [(b"k%05d" % i, b"v" * 100) for i in range(6000)]
    lsmkv.spark.write(spark.createDataFrame(rows, "key binary, value binary"), store, engine="btree")
    df = spark.read.format("lsmkv").option("minPartitionBytes", 1024).load(store)
    out["read_partitions"] = df.rdd.getNumPartitions()
    out["count"] = df.count()
    spark.stop()
    print(json.dumps(out))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_line(path, text, proc, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, errors="replace") as f:
            if text in f.read():
                return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    with open(path, errors="replace") as f:
        raise AssertionError(f"no {text!r} in {path}:\n{f.read()[-3000:]}")


@pytest.fixture
def cluster(tmp_path):
    pytest.importorskip("pyspark")
    import pyspark
    spark_class = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    port = _free_port()
    procs = []
    try:
        master_log = tmp_path / "master.log"
        master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(_free_port())],
                                  stdout=open(master_log, "w"), stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
        procs.append(master)
        _wait_for_line(master_log, "I have been elected leader", master)
        worker_log = tmp_path / "worker.log"
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", "--cores", str(CORES),
                                   "--memory", "1g", "--webui-port", str(_free_port()),
                                   "--work-dir", str(tmp_path / "work"), f"spark://127.0.0.1:{port}"],
                                  stdout=open(worker_log, "w"), stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)
        procs.append(worker)
        _wait_for_line(worker_log, "Successfully registered with master", worker)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in reversed(procs):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_cluster_session_takes_the_cluster_parallelism(cluster, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run([sys.executable, str(script), cluster, str(tmp_path / "db")], capture_output=True,
                            text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-5000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"parallelism": CORES, "parallelism_set": False, "shuffle_partitions": "200",
                   "task_lsmkv": lsmkv.__file__, "read_partitions": CORES, "count": 6000}
