"""btree compact_range(), the vacuum: the space of deleted data goes back
to the file system, every live entry (values in overflow chains, values
with a ttl, metadata entries) survives it, snapshots taken before end with
a clear error, read-only handles move to the new file, and a SIGKILL at
any moment of it loses nothing (the crash driver runs it too:
tests/crashtest)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import btree
from lsmkv.base.errors import ReadOnlyError


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))


@pytest.mark.slow
def test_deleting_90_percent_then_vacuuming_gives_the_space_back(tmp_path):
    path = str(tmp_path / "db")
    rng = random.Random(5)
    keys = [rng.randbytes(16) for _ in range(200_000)]
    with btree.open(path) as db:
        with db.write_batch() as batch:
            for k in keys:
                batch.put(k, rng.randbytes(100))
        db.flush()  # the page file holds all 200,000 entries
        filled = _dir_bytes(path)
        kept = set(rng.sample(range(len(keys)), 20_000))
        with db.write_batch() as batch:
            for i, k in enumerate(keys):
                if i not in kept:
                    batch.delete(k)
        db.put(b"overflow", b"o" * 50_000)
        db.put(b"with-ttl", b"t", ttl=3600)
        db.put(b"expired", b"e", ttl=0.001)
        with db.write_batch() as batch:
            batch.set_meta("loader", b"offset 7")
        time.sleep(0.01)
        model = dict(db.items())
        assert b"expired" not in model
        db.flush()
        before = _dir_bytes(path)
        db.compact_range()
        after = _dir_bytes(path)
        live = sum(len(k) + len(v) for k, v in model.items())
        assert after <= 1.5 * live + (1 << 20), (before, after, live)
        assert after < filled / 5 and after < before
        assert dict(db.items()) == model
        assert db.get_meta("loader") == b"offset 7"
        stats = db.stats()
        assert stats["vacuums"] == 1 and stats["vacuum_pages_freed"] > 0
        assert stats["entries"] == len(model) and stats["ttl_entries"] == 1
        assert db.check_invariants() == []
        db.put(b"after", b"vacuum")  # writes go on, in the new file
        model[b"after"] = b"vacuum"
    assert not os.path.exists(os.path.join(path, "btree.pages.vacuum"))
    assert btree.check(path).problems == []
    with btree.open(path) as db:
        assert dict(db.items()) == model
        assert db.get_meta("loader") == b"offset 7"


def test_snapshots_and_cursors_taken_before_read_on_through_the_old_file(tmp_path):
    with btree.open(str(tmp_path / "db")) as db:
        for i in range(2000):
            db.put(b"k%05d" % i, b"v" * 50)
        snap = db.snapshot()
        it = db.iterator()
        it.seek_to_first()
        for i in range(2000):
            db.put(b"k%05d" % i, b"w" * 50)
        db.compact_range(b"k00000", None)  # bounds are accepted; the whole file is rewritten
        assert snap.get(b"k00001") == b"v" * 50
        it.next()
        assert it.key() == b"k00001" and it.value() == b"v" * 50
        it.close()
        snap.close()
        assert db.stats()["snapshot_views"] == 0  # the old file is closed with its last snapshot
        with db.snapshot() as fresh:  # a snapshot taken after reads the new file
            assert fresh.get(b"k00001") == b"w" * 50
        with pytest.raises(TypeError):
            db.compact_range(12)


def test_bad_bounds_and_read_only_handles_are_refused_and_change_nothing(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path) as db:
        db.put(b"a", b"1")
    with btree.open(path, read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.compact_range()
    with btree.open(path) as db:
        with pytest.raises(TypeError):
            db.compact_range(end=3.5)
        assert dict(db.items()) == {b"a": b"1"}


def test_a_read_only_handle_moves_to_the_rewritten_file(tmp_path):
    path = str(tmp_path / "db")
    writer = btree.open(path)
    for i in range(5000):
        writer.put(b"k%05d" % i, b"v" * 80)
    for i in range(0, 5000, 2):
        writer.delete(b"k%05d" % i)
    writer.flush()
    reader = btree.open(path, read_only=True)
    try:
        expected = dict(writer.items())
        assert dict(reader.items()) == expected
        writer.compact_range()
        assert dict(reader.items()) == expected  # still the file it has open, the same data
        writer.put(b"new", b"1")
        writer.flush()  # a checkpoint of the new file: the reader must not take it for damage
        reader.refresh()
        assert dict(reader.items()) == {**expected, b"new": b"1"}
        assert reader._pager.replaced() is False
    finally:
        reader.close()
        writer.close()


CHILD = textwrap.dedent("""
    import os, sys, btree
    path = sys.argv[1]
    db = btree.open(path, page_size=1024)
    i = 0
    while True:
        with db.write_batch(sync=True) as b:
            for j in range(50):
                b.put(b"k%07d" % ((i * 50 + j) % 40000), b"v%07d" % i)
            b.set_meta("round", b"%d" % i)
        print(i, flush=True)  # acknowledged as durable
        if i % 20 == 19:
            db.compact_range()
        i += 1
""")


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_at_random_moments_of_vacuuming_loses_no_acknowledged_write(tmp_path):
    path = str(tmp_path / "db")
    rng = random.Random(17)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    for cycle in range(12):
        proc = subprocess.Popen([sys.executable, str(script), path], stdout=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        acked = [int(line) for line in out.split()]
        with btree.open(path, page_size=1024) as db:
            assert db.check_invariants() == []
            if acked:
                last = acked[-1]
                stored = int(db.get_meta("round"))
                assert stored >= last  # the last acknowledged round is there (one more may have landed)
                for j in range(50):  # ... with all of its writes, or a later round's
                    key = b"k%07d" % ((stored * 50 + j) % 40000)
                    assert db.get(key) == b"v%07d" % stored
        assert not os.path.exists(os.path.join(path, "btree.pages.vacuum"))
    assert btree.check(path).problems == []
