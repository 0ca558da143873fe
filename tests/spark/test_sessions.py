"""The sessions lsmkv.spark builds (sessions.py): a local master gets its
cores as the default parallelism, a cluster master keeps Spark's own (which
follow the executors' cores); Spark's Python workers run this interpreter
and import this lsmkv."""

from __future__ import annotations

import os

import pytest

import lsmkv
from lsmkv.spark.sessions import is_local, local_cores, local_driver_memory, local_settings

from .conftest import fill


def test_settings_chosen_for_each_master():
    assert local_settings("local[3]") == {"spark.default.parallelism": "3", "spark.sql.shuffle.partitions": "4",
                                          "spark.driver.memory": local_driver_memory()}
    assert local_settings("local[4,2]")["spark.default.parallelism"] == "4"
    assert local_settings("local")["spark.default.parallelism"] == "1"
    assert local_settings("local[*]")["spark.default.parallelism"] == str(os.cpu_count())
    for cluster in ("spark://head:7077", "spark://a:7077,b:7077", "yarn", "k8s://https://api:6443",
                    "local-cluster[2,1,1024]"):
        assert not is_local(cluster) and local_settings(cluster) == {}, cluster
    with pytest.raises(ValueError, match="expected local, local\\[N\\]"):
        local_cores("local[many]")


def test_a_local_sessions_heap_is_a_quarter_of_memory_within_bounds():
    gib = 1 << 30
    assert local_driver_memory(24 * gib) == "6144m"
    assert local_driver_memory(2 * gib) == "1024m"  # never below Spark's own default
    assert local_driver_memory(64 * gib) == "8192m"
    assert local_driver_memory(0) == "1024m"  # memory unknown


@pytest.mark.spark
@pytest.mark.slow
def test_local_session_parallelism_and_workers_import_this_lsmkv(spark, tmp_path):
    sc = spark.sparkContext
    assert sc.master == "local[2]" and sc.defaultParallelism == 2
    assert spark.conf.get("spark.default.parallelism") == "2"
    # The heap the session asked for is the JVM's (it started the JVM).
    heap_mib = int(local_driver_memory()[:-1])
    assert spark.conf.get("spark.driver.memory") == local_driver_memory()
    assert sc._jvm.java.lang.Runtime.getRuntime().maxMemory() > 0.85 * (heap_mib << 20)
    # The tasks' Python imports the lsmkv under test (PYTHONPATH reaches the workers).
    seen = sc.parallelize(range(2), 2).map(lambda _: (__import__("lsmkv").__file__, __import__("sys").executable))
    assert set(seen.collect()) == {(lsmkv.__file__, __import__("sys").executable)}
    # A read without numPartitions gets the session's parallelism.
    path = str(tmp_path / "db")
    fill(path, "lsm", {b"k%05d" % i: b"v" * 100 for i in range(3000)})
    df = spark.read.format("lsmkv").option("minPartitionBytes", 1024).option("consistent", "false").load(path)
    assert df.rdd.getNumPartitions() == 2 and df.count() == 3000
