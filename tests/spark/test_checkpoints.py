"""Read checkpoints (lsmkv/spark/checkpoints.py): reads of an unchanged
store share one checkpoint, a changed store gets a new one (never the old
version), the space is bounded by maxCheckpoints, and what a dead planner
left is removed. The first tests drive checkpoints.py directly; the last
read through Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import btree
import lsmkv
import lsmkv.spark
from lsmkv.spark import checkpoints
from lsmkv.spark.owners import Owner

from .conftest import contents, fill

ENGINES = ["lsm", "btree"]


def _open(engine, path):
    return lsmkv.open(path) if engine == "lsm" else btree.open(path)


def _settle() -> None:
    """Let the store's newest file age past SETTLED_S, as a store nobody
    wrote to in the last second."""
    time.sleep(checkpoints.SETTLED_S + 0.05)


def _store(tmp_path, engine, n=2000):
    path = str(tmp_path / "db")
    fill(path, engine, {b"k%05d" % i: b"v" * 50 for i in range(n)})
    return path


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_fingerprint_follows_every_visible_write(tmp_path, engine):
    path = _store(tmp_path, engine)
    assert checkpoints.fingerprint(path) is None  # just written: cannot be told yet
    _settle()
    first = checkpoints.fingerprint(path)
    assert first is not None and checkpoints.fingerprint(path) == first
    with _open(engine, path) as db:
        db.put(b"k00001", b"changed")  # one small write, still in the log
        _settle()
        assert checkpoints.fingerprint(path) not in (None, first)  # seen by another process: a new version


def test_a_read_only_snapshot_leaves_a_btree_stores_fingerprint_as_it_was(tmp_path):
    """A snapshot of a read-only handle registers in btree's reader table
    (btree.readers changes), which changes no data: the version stays."""
    path = _store(tmp_path, "btree")
    past = time.time() - 10 * checkpoints.SETTLED_S
    for name in os.listdir(path) + [""]:
        os.utime(os.path.join(path, name), (past, past))  # as a store nobody wrote to for a while
    first = checkpoints.fingerprint(path)
    assert first is not None
    readers = os.path.join(path, "btree.readers")
    before = os.stat(readers).st_mtime_ns
    with btree.open(path, read_only=True) as db, db.snapshot() as snap:
        assert snap.get(b"k00001") == b"v" * 50
    assert os.stat(readers).st_mtime_ns != before  # the reader registered
    assert checkpoints.fingerprint(path) == first


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_an_unchanged_store_has_one_checkpoint_and_a_changed_one_a_new_one(tmp_path, engine):
    path = _store(tmp_path, engine)
    ckpts = str(tmp_path / "ckpts")
    _settle()
    taken = {checkpoints.take(path, engine, ckpts) for _ in range(5)}
    assert len(taken) == 1 and [p for _, p in checkpoints.checkpoints(ckpts)] == list(taken)
    (shared,) = taken
    with _open(engine, path) as db:
        db.put(b"new", b"1")
    # Written a moment ago: a checkpoint of its own, holding the new key.
    fresh = checkpoints.take(path, engine, ckpts)
    assert fresh != shared and contents(fresh)[b"new"] == b"1" and b"new" not in contents(shared)
    _settle()
    again = checkpoints.take(path, engine, ckpts)
    assert again not in (fresh, shared) and contents(again)[b"new"] == b"1"
    assert checkpoints.take(path, engine, ckpts) == again
    # Shared even by a read whose retention has passed for every checkpoint,
    # which removes the others.
    assert checkpoints.take(path, engine, ckpts, retention_s=0) == again
    assert [p for _, p in checkpoints.checkpoints(ckpts)] == [again]


@pytest.mark.parametrize("engine", ENGINES)
def test_checkpoints_are_bounded_and_a_read_one_is_kept(tmp_path, engine):
    path = _store(tmp_path, engine)
    ckpts = str(tmp_path / "ckpts")
    first = checkpoints.take(path, engine, ckpts, keep=2)
    with checkpoints.Lease(first):  # a partition is reading it
        for i in range(6):
            with _open(engine, path) as db:
                db.put(b"round", b"%d" % i)
            checkpoints.take(path, engine, ckpts, keep=2)
            held = [p for _, p in checkpoints.checkpoints(ckpts)]
            # The one being read, plus at most 2 others.
            assert first in held and len(held) <= 3
    newest = checkpoints.take(path, engine, ckpts, keep=2)
    held = [p for _, p in checkpoints.checkpoints(ckpts)]
    assert first not in held and len(held) == 2 and held[0] == newest
    assert contents(newest)[b"round"] == b"5"
    # Bounded in bytes too: two copies of the store at most.
    assert _bytes(ckpts) <= 2 * _bytes(path) + 2 * 65536
    assert sorted(checkpoints.remove_checkpoints(ckpts)) == sorted(held)
    assert not os.path.exists(ckpts)


def test_a_read_of_a_removed_checkpoint_fails_with_a_clear_error(tmp_path):
    path = _store(tmp_path, "btree")
    ckpts = str(tmp_path / "ckpts")
    taken = checkpoints.take(path, "btree", ckpts)
    assert checkpoints.remove_checkpoints(ckpts) == [taken]
    with pytest.raises(FileNotFoundError, match="is gone: .*load the DataFrame again"):
        checkpoints.Lease(taken)


@pytest.mark.subprocess
def test_a_checkpoint_a_dead_planner_was_taking_is_removed(tmp_path):
    path = _store(tmp_path, "lsm")
    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = Owner.of(dead.pid)
    dead.wait()
    abandoned = ckpts / ".taking-abc"
    (abandoned / "checkpoint").mkdir(parents=True)
    (abandoned / "checkpoint" / "partial").write_bytes(b"x" * 1000)
    owner.write(str(abandoned))
    running = ckpts / ".taking-def"
    running.mkdir()
    Owner.of(os.getpid()).write(str(running))
    checkpoints.take(path, "lsm", str(ckpts))
    assert not abandoned.exists() and running.exists()


def _bytes(directory) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        total += sum(os.stat(os.path.join(root, f)).st_blocks * 512 for f in files)
    return total


def _read(spark, path, ckpts, **options):
    r = (spark.read.format("lsmkv").option("numPartitions", 4).option("minPartitionBytes", 4096)
         .option("checkpointDir", ckpts))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(path)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_reads_through_spark_leave_one_copy_of_an_unchanged_store(spark, tmp_path, engine):
    path = _store(tmp_path, engine, n=4000)
    ckpts = str(tmp_path / "ckpts")
    _settle()
    frames = [_read(spark, path, ckpts) for _ in range(5)]
    assert all(df.rdd.getNumPartitions() > 1 for df in frames)  # consistent reads of several partitions
    assert [df.count() for df in frames] == [4000] * 5
    assert len(checkpoints.checkpoints(ckpts)) == 1
    assert frames[0].count() == 4000  # a DataFrame's second action reads its checkpoint again
    # A write, then a read: the new version, in a checkpoint of its own; the
    # earlier DataFrames still read theirs.
    with _open(engine, path) as db:
        db.put(b"k99999", b"new")
    assert _read(spark, path, ckpts).count() == 4001
    assert len(checkpoints.checkpoints(ckpts)) == 2
    assert frames[1].count() == 4000
    lsmkv.spark.remove_checkpoints(path, checkpoint_dir=ckpts)
    assert not os.path.exists(ckpts)
