"""Table files written outside a database (lsmkv.TableWriter) and taken in
whole by db.ingest on both engines; checkpoints and split keys, the pieces
the Spark data source builds on."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import btree
import lsmkv
from btree.check import check as check_btree
from lsmkv.lsm.check import check_db as check_lsm
from lsmkv.base.errors import SizeLimitError
from lsmkv.base.keys import MAX_KEY_SIZE
from lsmkv.lsm.version import NUM_LEVELS

ENGINES = {"lsm": lsmkv, "btree": btree}
CHECK = {"lsm": check_lsm, "btree": check_btree}


def write_table(path, items):
    with lsmkv.TableWriter(path) as w:
        for key, value in items:
            if value is None:
                w.delete(key)
            else:
                w.put(key, value)
    return str(path)


def key(i: int) -> bytes:
    return b"k%06d" % i


# -- TableWriter ---------------------------------------------------------------

def test_table_writer_round_trips_and_appears_only_when_finished(tmp_path):
    path = tmp_path / "a.sst"
    w = lsmkv.TableWriter(path)
    w.put_sorted([key(i) for i in range(0, 500)], [b"v%d" % i for i in range(0, 500)])
    w.put(key(600), b"x")
    w.delete(key(700))
    assert not path.exists()
    info = w.finish()
    assert path.exists() and not (tmp_path / "a.sst.tmp").exists()
    assert (info.entries, info.smallest, info.largest) == (502, key(0), key(700))
    assert info.size == path.stat().st_size
    got = list(lsmkv.read_table(path))
    assert got[:2] == [(key(0), b"v0"), (key(1), b"v1")]
    assert got[-2:] == [(key(600), b"x"), (key(700), None)]


def test_a_table_writer_used_with_with_gives_its_table_info_after_the_block(tmp_path):
    path = tmp_path / "a.sst"
    with lsmkv.TableWriter(path) as w:
        assert w.info is None
        w.put(key(1), b"one")
        w.put(key(2), b"two")
    info = w.finish()
    assert info is w.info and w.finish() is info
    assert (info.path, info.entries, info.size) == (str(path), 2, path.stat().st_size)
    assert (info.smallest, info.largest) == (key(1), key(2))
    with pytest.raises(ValueError, match="has finished"):
        w.put(key(3), b"three")
    assert list(lsmkv.read_table(path)) == [(key(1), b"one"), (key(2), b"two")]


def test_an_aborted_table_writer_cannot_finish(tmp_path):
    w = lsmkv.TableWriter(tmp_path / "a.sst")
    w.put(key(1), b"one")
    w.abort()
    with pytest.raises(ValueError, match="aborted"):
        w.finish()
    assert w.info is None and os.listdir(tmp_path) == []


@pytest.mark.parametrize("bad", [
    lambda w: (w.put(b"b", b"1"), w.put(b"a", b"2")),
    lambda w: (w.put(b"a", b"1"), w.put(b"a", b"2")),
    lambda w: w.put_sorted([b"b", b"a"], [b"1", b"2"]),
    lambda w: w.put_sorted([b"a", b"b"], [b"1"]),
])
def test_table_writer_refuses_keys_out_of_order_and_keeps_nothing(tmp_path, bad):
    path = tmp_path / "a.sst"
    with pytest.raises(ValueError):
        with lsmkv.TableWriter(path) as w:
            bad(w)
    assert os.listdir(tmp_path) == []


def test_a_refused_put_sorted_adds_nothing_and_the_writer_goes_on(tmp_path):
    path = tmp_path / "a.sst"
    w = lsmkv.TableWriter(path)
    w.put_sorted([key(1), key(2)], [b"1", b"2"])
    for keys in ([key(3), key(3)], [key(2), key(4)], [key(5), key(4)], [key(0)]):
        with pytest.raises(ValueError, match="strictly ascending"):
            w.put_sorted(keys, [b"x"] * len(keys))
    w.put_sorted([key(3), key(4)], [b"3", b"4"])
    assert w.finish().entries == 4
    assert list(lsmkv.read_table(path)) == [(key(i), b"%d" % i) for i in range(1, 5)]


@pytest.mark.parametrize("block_size", [64, 300, 4096])
def test_put_sorted_writes_the_same_file_as_puts_one_at_a_time(tmp_path, block_size):
    # Keys and values of many lengths, so blocks are cut at every offset
    # within a put_sorted call and across calls.
    rng = random.Random(block_size)
    keys = sorted({rng.randbytes(rng.randrange(1, 30)) for _ in range(3000)})
    values = [rng.randbytes(rng.randrange(0, 200)) for _ in keys]
    one = lsmkv.TableWriter(tmp_path / "one.sst", block_size=block_size)
    for k, v in zip(keys, values):
        one.put(k, v)
    many = lsmkv.TableWriter(tmp_path / "many.sst", block_size=block_size)
    for i in range(0, len(keys), 317):
        many.put_sorted(keys[i:i + 317], values[i:i + 317])
    assert one.finish().entries == many.finish().entries == len(keys)
    assert (tmp_path / "one.sst").read_bytes() == (tmp_path / "many.sst").read_bytes()


def _columns(keys, values):
    """keys and values as put_columns takes them: offsets and data."""
    return (np.cumsum([0, *map(len, keys)]), b"".join(keys), np.cumsum([0, *map(len, values)]), b"".join(values))


@pytest.mark.parametrize("block_size", [64, 300, 4096])
def test_put_columns_writes_the_same_file_as_put_sorted(tmp_path, block_size):
    rng = random.Random(block_size + 1)
    keys = sorted({rng.randbytes(rng.randrange(0, 30)) for _ in range(3000)})
    values = [rng.choice((b"", rng.randbytes(rng.randrange(1, 200)), b"z" * 150)) for _ in keys]
    lists = lsmkv.TableWriter(tmp_path / "lists.sst", block_size=block_size)
    columns = lsmkv.TableWriter(tmp_path / "columns.sst", block_size=block_size)
    for i in range(0, len(keys), 317):
        lists.put_sorted(keys[i:i + 317], values[i:i + 317])
        columns.put_columns(*_columns(keys[i:i + 317], values[i:i + 317]))
    assert lists.finish().entries == columns.finish().entries == len(keys)
    assert (tmp_path / "lists.sst").read_bytes() == (tmp_path / "columns.sst").read_bytes()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=300, unique=True),
       st.lists(st.sampled_from(["put", "put_sorted", "put_columns"]), min_size=1, max_size=12),
       st.sampled_from([64, 256, 4096]))
def test_put_put_sorted_and_put_columns_mix_in_one_file(keys, calls, block_size):
    keys.sort()
    values = [k[::-1] * 3 for k in keys]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "a.sst")
        w = lsmkv.TableWriter(path, block_size=block_size)
        # The keys cut into one run per call (the last call takes the rest).
        cuts = sorted({0, len(keys), *(len(keys) * (i + 1) // len(calls) for i in range(len(calls) - 1))})
        for call, (a, b) in zip(calls, zip(cuts, cuts[1:])):
            if call == "put":
                for k, v in zip(keys[a:b], values[a:b]):
                    w.put(k, v)
            elif call == "put_sorted":
                w.put_sorted(keys[a:b], values[a:b])
            else:
                # Offsets that do not start at 0, over data with bytes around the run.
                ko, kd, vo, vd = _columns(keys, values)
                w.put_columns(ko[a:b + 1], kd, vo[a:b + 1], vd)
        assert w.finish().entries == len(keys)
        assert list(lsmkv.read_table(path)) == list(zip(keys, values))


def test_a_refused_put_columns_adds_nothing_and_the_writer_goes_on(tmp_path):
    path = tmp_path / "a.sst"
    w = lsmkv.TableWriter(path)
    w.put_columns(*_columns([key(1), key(2)], [b"1", b"2"]))
    for keys in ([key(3), key(3)], [key(2), key(4)], [key(5), key(4)], [key(0)], [key(2)]):
        with pytest.raises(ValueError, match="strictly ascending"):
            w.put_columns(*_columns(keys, [b"x"] * len(keys)))
    ko, kd, vo, vd = _columns([key(3), key(4)], [b"3", b"4"])
    bad = [((ko, kd, vo[:2], vd), ValueError, "2 keys and 1 values"),
           ((ko[::-1], kd, vo, vd), ValueError, "key offsets must not decrease"),
           ((ko, kd[:-1], vo, vd), ValueError, "within the key data"),
           ((ko, kd, vo - 1, vd), ValueError, "within the value data"),
           ((ko.astype(float), kd, vo, vd), ValueError, "key_offsets must be a 1-D array"),
           ((np.stack([ko, ko]), kd, vo, vd), ValueError, "key_offsets must be a 1-D array"),
           ((np.array([0, MAX_KEY_SIZE + 1]), b"k" * (MAX_KEY_SIZE + 1), np.array([0, 1]), b"v"),
            SizeLimitError, "a key is")]
    for args, error, message in bad:
        with pytest.raises(error, match=message):
            w.put_columns(*args)
    assert w.entries == 2
    w.put_columns(ko, kd, vo, vd)
    w.put_columns(np.array([0]), b"", np.array([0]), b"")  # no entries: nothing to do
    assert w.finish().entries == 4
    assert list(lsmkv.read_table(path)) == [(key(i), b"%d" % i) for i in range(1, 5)]


def test_table_writer_refuses_bad_input_with_one_clear_error(tmp_path):
    with pytest.raises(TypeError, match="key must be bytes"):
        lsmkv.TableWriter(tmp_path / "a.sst").put("text", b"v")
    with pytest.raises(ValueError, match="at least one entry"):
        lsmkv.TableWriter(tmp_path / "b.sst").finish()
    (tmp_path / "c.sst").write_bytes(b"")
    with pytest.raises(FileExistsError):
        lsmkv.TableWriter(tmp_path / "c.sst")
    with pytest.raises(ValueError, match="compression"):
        lsmkv.TableWriter(tmp_path / "d.sst", compression="lz4")
    assert sorted(os.listdir(tmp_path)) == ["a.sst.tmp", "c.sst"]  # the first writer was never finished


# -- ingest, both engines --------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_ingested_data_replaces_what_it_overlaps(tmp_path, engine):
    mod = ENGINES[engine]
    a = write_table(tmp_path / "a.sst", [(key(i), None if i == 5 else b"new%d" % i) for i in range(0, 100)])
    b = write_table(tmp_path / "b.sst", [(key(i), b"b") for i in range(1000, 1100)])
    with mod.open(tmp_path / "db") as db:
        for i in range(0, 200, 2):
            db.put(key(i), b"old")
        db.flush()
        db.put(key(4), b"in the memtable")
        db.ingest([b, a], move=True)
        assert db.get(key(4)) == b"new4"
        assert db.get(key(5)) is None and db.get(key(6)) == b"new6"
        assert db.get(key(150)) == b"old" and db.get(key(1050)) == b"b"
        db.put(key(6), b"after")  # writes after the ingest are newer
        assert db.get(key(6)) == b"after"
        expected = {key(i): b"old" for i in range(0, 200, 2)}
        expected.update({key(i): b"new%d" % i for i in range(0, 100)})
        expected.update({key(i): b"b" for i in range(1000, 1100)})
        del expected[key(5)]
        expected[key(6)] = b"after"
        assert dict(db.scan()) == expected
    assert not os.path.exists(a) and not os.path.exists(b)
    with mod.open(tmp_path / "db") as db:  # durable
        assert dict(db.scan()) == expected
    assert CHECK[engine](str(tmp_path / "db")).ok


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_ingest_input_changes_nothing(tmp_path, engine, directory_bytes):
    mod = ENGINES[engine]
    a = write_table(tmp_path / "a.sst", [(key(i), b"a") for i in range(0, 50)])
    b = write_table(tmp_path / "b.sst", [(key(i), b"b") for i in range(40, 90)])
    junk = tmp_path / "junk.sst"
    junk.write_bytes(b"not a table" * 100)
    with mod.open(tmp_path / "db") as db:
        db.put(key(1), b"old")
        db.flush()
    before = directory_bytes(tmp_path / "db")
    with mod.open(tmp_path / "db") as db:
        with pytest.raises(ValueError, match="overlap"):
            db.ingest([a, b])
        with pytest.raises(lsmkv.CorruptionError, match="not a valid table"):
            db.ingest([a, str(junk)])
        with pytest.raises(FileNotFoundError):
            db.ingest([a, str(tmp_path / "missing.sst")])
        with pytest.raises(TypeError, match="list"):
            db.ingest(a)
        with pytest.raises(ValueError, match="twice"):
            db.ingest([a, a])
        assert db.get(key(1)) == b"old"
        db.put(key(2), b"still writable")
    assert os.path.exists(a) and os.path.exists(b)
    with mod.open(tmp_path / "db") as db:
        assert dict(db.scan()) == {key(1): b"old", key(2): b"still writable"}
    del before  # the stores differ only by the later put; the checks above show nothing else changed


def test_lsm_ingest_into_empty_ranges_goes_to_the_bottom_without_compaction(tmp_path):
    files = [write_table(tmp_path / f"{n}.sst", [(key(n * 1000 + i), b"v" * 50) for i in range(1000)])
             for n in range(4)]
    with lsmkv.open(tmp_path / "db") as db:
        db.ingest(files)
        levels = [len(files) for files in db._state.version.levels]
        assert levels == [0] * (NUM_LEVELS - 1) + [4]
        stats = db.stats()
        assert stats["ingest_count"] == 1 and stats["compaction_bytes_written"] == 0
        assert len(db) == 4000
    assert os.path.exists(files[0])  # move=False keeps the sources


def test_lsm_ingest_over_level0_stays_newest_and_older_snapshots_do_not_see_it(tmp_path):
    with lsmkv.open(tmp_path / "db", disable_auto_compactions=True) as db:
        db.put(key(1), b"old")
        db.flush()  # a level-0 table overlapping the ingest
        snap = db.snapshot()
        db.ingest([write_table(tmp_path / "a.sst", [(key(0), b"n0"), (key(1), b"n1")])])
        assert db._state.version.levels[0][0].global_seq  # placed in level 0, newest first
        assert db.get(key(1)) == b"n1" and snap.get(key(1)) == b"old" and snap.get(key(0)) is None
        snap.close()
        db.compact_range()
        assert db.get(key(1)) == b"n1" and db.get(key(0)) == b"n0"
    assert check_lsm(str(tmp_path / "db")).ok


def test_btree_ingest_builds_the_tree_at_the_fill_factor(tmp_path):
    rows = [(key(i), b"v" * 40) for i in range(5000)]
    sizes = {}
    for fill in (1.0, 0.6):
        write_table(tmp_path / f"{fill}.sst", rows)
        with btree.open(tmp_path / f"db{fill}") as db:
            db.ingest([str(tmp_path / f"{fill}.sst")], fill_factor=fill)
            assert len(db) == 5000 and db.get(key(4999)) == b"v" * 40
            sizes[fill] = db.stats()["page_count"]
        assert check_btree(str(tmp_path / f"db{fill}")).ok
    assert sizes[0.6] > sizes[1.0] * 1.4
    with btree.open(tmp_path / "db1.0") as db:
        with pytest.raises(ValueError, match="fill_factor"):
            db.ingest([str(tmp_path / "0.6.sst")], fill_factor=0.2)


def test_btree_ingest_refuses_keys_over_its_limit_and_stays_writable(tmp_path):
    big = write_table(tmp_path / "a.sst", [(b"x" * 3000, b"v")])
    with btree.open(tmp_path / "db") as db:
        db.put(b"a", b"1")
        with pytest.raises(lsmkv.SizeLimitError):
            db.ingest([big])
        db.put(b"b", b"2")
        assert dict(db.scan()) == {b"a": b"1", b"b": b"2"}


@pytest.mark.parametrize("engine", ENGINES)
def test_ingest_on_a_read_only_handle_is_refused(tmp_path, engine):
    mod = ENGINES[engine]
    with mod.open(tmp_path / "db") as db:
        db.put(b"a", b"1")
    a = write_table(tmp_path / "a.sst", [(b"a", b"2")])
    with mod.open(tmp_path / "db", read_only=True) as db:
        with pytest.raises(lsmkv.ReadOnlyError):
            db.ingest([a])


# -- a crash during an ingest: all of it or none --------------------------------

_INGESTER = textwrap.dedent("""
    import sys, lsmkv
    db = lsmkv.open(sys.argv[1], write_buffer_size=1 << 20)
    db.put(b"acked", b"before", sync=True)
    print("ready", flush=True)
    db.ingest(sys.argv[2:])
    print("done", flush=True)
    db.close()
""")


@pytest.mark.crash
@pytest.mark.slow
def test_sigkill_during_an_ingest_leaves_all_of_it_or_none(tmp_path):
    outcomes = set()
    for attempt, delay in enumerate([0.0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.4]):
        base = tmp_path / str(attempt)
        base.mkdir()
        files = [write_table(base / f"{n}.sst", [(key(n * 20000 + i), b"v%d" % n) for i in range(20000)])
                 for n in range(3)]
        proc = subprocess.Popen([sys.executable, "-c", _INGESTER, str(base / "db"), *files],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with lsmkv.open(base / "db") as db:
            assert db.get(b"acked") == b"before"
            present = [db.get(key(n * 20000 + 7)) is not None for n in range(3)]
            assert present in ([False] * 3, [True] * 3), present
            count = len(db)
            assert count in (1, 60001)
            outcomes.add(count)
        assert check_lsm(str(base / "db")).ok
    assert outcomes  # which of the two a given delay gives depends on the machine's speed


# -- checkpoints --------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_checkpoint_is_a_consistent_independent_copy(tmp_path, engine):
    mod = ENGINES[engine]
    with mod.open(tmp_path / "db") as db:
        for i in range(3000):
            db.put(key(i), b"v%d" % i)
        db.flush()
        for i in range(0, 3000, 3):
            db.put(key(i), b"memtable")
        db.delete(key(1))
        with db.write_batch() as b:
            b.set_meta("offset", b"17")
        expected = dict(db.scan())
        db.checkpoint(tmp_path / "cp")
        db.put(key(2), b"after the checkpoint")
        with pytest.raises(FileExistsError):
            db.checkpoint(tmp_path / "cp")
    mod.destroy(tmp_path / "db")
    with mod.open(tmp_path / "cp") as cp:
        assert dict(cp.scan()) == expected
        assert cp.get_meta("offset") == b"17"
        cp.put(b"writable", b"yes")
    assert CHECK[engine](str(tmp_path / "cp")).ok


_GROUP_WRITER = textwrap.dedent("""
    import sys, lsmkv, btree
    mod = {"lsm": lsmkv, "btree": btree}[sys.argv[2]]
    db = mod.open(sys.argv[1])
    n = 0
    print("writing", flush=True)
    while True:
        n += 1
        with db.write_batch() as b:   # every key of the group gets the same counter, atomically
            for i in range(200):
                b.put(b"g%04d" % i, b"%d" % n)
        if n % 50 == 0:
            db.flush()
""")


@pytest.mark.subprocess
@pytest.mark.parametrize("engine", ENGINES)
def test_checkpoint_of_a_store_another_process_writes_to_is_one_version(tmp_path, engine):
    mod = ENGINES[engine]
    with mod.open(tmp_path / "db") as db:
        db.put(b"seed", b"1")
    proc = subprocess.Popen([sys.executable, "-c", _GROUP_WRITER, str(tmp_path / "db"), engine],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        seen = set()
        for n in range(5):
            time.sleep(0.3)
            mod.checkpoint(tmp_path / "db", tmp_path / f"cp{n}")
            with mod.open(tmp_path / f"cp{n}", read_only=True) as cp:
                values = {v for k, v in cp.scan(prefix=b"g")}
                assert len(values) <= 1, values  # never a mix of two batches
                seen |= values
    finally:
        proc.kill()
        proc.wait()
    assert seen  # the writer had written by then


# -- split keys -----------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_split_keys_cut_the_store_into_ranges_of_similar_size(tmp_path, engine):
    mod = ENGINES[engine]
    with mod.open(tmp_path / "db") as db:
        assert db.split_keys(4) == []
        with db.write_batch() as b:
            for i in range(60000):
                b.put(key(i), os.urandom(60))
        db.flush()
        if engine == "lsm":
            db.compact_range()
        assert db.split_keys(1) == []
        with pytest.raises(ValueError):
            db.split_keys(0)
        cuts = db.split_keys(4)
        assert 1 <= len(cuts) <= 3 and cuts == sorted(set(cuts))
        bounds = [None, *cuts, None]
        counts = [sum(1 for _ in db.scan(bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]
        assert sum(counts) == 60000
        assert max(counts) < 3 * 60000 / len(counts), counts
