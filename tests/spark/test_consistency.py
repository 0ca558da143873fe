"""A read through the data source sees one version of the store while
another process writes to it.

The writer process sets every key of one group to the same counter value
in one atomic batch, over and over (a new counter each batch, groups in
turn), flushing now and then. A DataFrame read of several partitions
(each partition a separate task opening the store) must show, for every
group, a single counter: rows of one group from two versions would mean
partitions read different versions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import defaultdict

import pytest

import lsmkv.spark

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GROUPS = 4
PER_GROUP = 400

def _writer_script(tmp_path) -> str:
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        engine, path, groups, per_group, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        if engine == "lsm":
            import lsmkv
            db = lsmkv.open(path, write_buffer_size=64 * 1024)
        else:
            import btree
            db = btree.open(path)
        counter = 0
        with db:
            print("ready", flush=True)
            while not os.path.exists(stop):
                counter += 1
                g = counter % groups
                with db.write_batch() as batch:
                    for i in range(per_group):
                        batch.put(b"g%d:%05d" % (g, i), b"%010d" % counter + b"x" * 90)
                if counter % 50 == 0:
                    db.flush()
        print(counter, flush=True)
    """))
    return str(script)


@pytest.mark.parametrize("engine", ["lsm", "btree"])
def test_read_while_another_process_writes_is_one_version(spark, tmp_path, engine):
    path = str(tmp_path / "db")
    rows = [(b"g%d:%05d" % (g, i), b"%010d" % 0 + b"x" * 90) for g in range(GROUPS) for i in range(PER_GROUP)]
    lsmkv.spark.write(spark.createDataFrame(rows, "key binary, value binary"), path, engine=engine,
                      num_partitions=4, targetFileBytes=16 * 1024)
    stop = str(tmp_path / "stop")
    proc = subprocess.Popen([sys.executable, _writer_script(tmp_path), engine, path, str(GROUPS), str(PER_GROUP),
                             stop], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        reads = 0
        for _ in range(3):
            df = (spark.read.format("lsmkv").option("numPartitions", 4).option("minPartitionBytes", 8192)
                  .option("checkpointDir", str(tmp_path / "ckpt")).load(path))
            assert df.rdd.getNumPartitions() > 1
            counters = defaultdict(set)
            n = 0
            for r in df.collect():
                counters[r.key.split(b":")[0]].add(r.value[:10])
                n += 1
            assert n == GROUPS * PER_GROUP
            assert all(len(c) == 1 for c in counters.values()), {g: sorted(c) for g, c in counters.items()}
            reads += 1
    finally:
        open(stop, "w").close()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert int(out.strip()) > 0  # the writer did write during the reads
    lsmkv.spark.remove_checkpoints(path, checkpoint_dir=str(tmp_path / "ckpt"))
    assert not os.path.exists(tmp_path / "ckpt")
