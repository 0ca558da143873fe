"""The error state and resume(), both engines.

A failed write stops writes (reads go on) and names its cause; resume()
brings writes back once the cause is gone and keeps failing while it is
not; a write that failed before it was applied never reappears, not even
after a later reopen, although its record may have landed whole in the log
it was written to. (A sync write whose group's fsync failed was applied
first: it stays, whole.)
"""

from __future__ import annotations

import errno
import os

import pytest

import btree
import lsmkv
from lsmkv.base.errors import BackgroundError, ClosedError, LsmkvError, ReadOnlyError
from lsmkv.base.fault_fs import FaultInjectionFS

OPTIONS = {"lsm": dict(compaction_executor="thread"), "btree": dict(page_size=512, cache_size=16 * 512)}


def open_db(engine, path, fs=None, **extra):
    opts = {**OPTIONS[engine], **extra}
    if fs is not None:
        opts["fs"] = fs
    return lsmkv.open(path, **opts) if engine == "lsm" else btree.open(path, **opts)


def resumed_written_and_reopened(engine, path, db, fs, ending) -> dict:
    """resume(), one more sync write (b"after"), then the ending: a clean
    close or a power loss; what the database holds when opened again."""
    db.resume()
    db.put(b"after", b"3", sync=True)
    if ending == "close":
        db.close()
    else:
        db._simulate_crash()
        fs.power_loss()
    with open_db(engine, path) as db:
        return dict(db.scan())


@pytest.fixture(params=["lsm", "btree"])
def engine(request):
    return request.param


@pytest.mark.parametrize("ending", ["close", "power loss"])
def test_a_failed_sync_write_without_group_commit_never_reappears(engine, scratch, ending):
    """One fsync per write (group_commit=False): the record reaches the log
    whole, then its fsync fails: the write was not applied, and after
    resume() and a reopen (after a clean close, or a power loss) it is gone."""
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = open_db(engine, path, fs, group_commit=False)
    db.put(b"kept", b"1", sync=True)
    fs.fail("sync", nth=1)
    with pytest.raises(BackgroundError) as info:
        db.put(b"failed", b"2", sync=True)
    assert info.value.errno == errno.EIO and "not applied" in str(info.value)
    assert db.get(b"failed") is None and db.get(b"kept") == b"1"
    assert resumed_written_and_reopened(engine, path, db, fs, ending) == {b"kept": b"1", b"after": b"3"}


@pytest.mark.parametrize("ending", ["close", "power loss"])
def test_a_sync_write_whose_group_fsync_fails_stays_applied_whole(engine, scratch, ending):
    """Group commit: the write is applied, then the log syncer's fsync
    fails: the writer gets BackgroundError saying the write was applied
    but is not known to be durable; it stays applied (whole) through
    resume() and any reopen, never half."""
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = open_db(engine, path, fs)
    db.put(b"kept", b"1", sync=True)
    fs.fail("sync", nth=1)
    with pytest.raises(BackgroundError) as info:
        with db.write_batch(sync=True) as batch:
            batch.put(b"failed", b"2")
            batch.put(b"failed too", b"2")
    assert info.value.errno == errno.EIO and "was applied but is not known to be durable" in str(info.value)
    assert db.get(b"failed") == b"2" and db.get(b"kept") == b"1"
    assert resumed_written_and_reopened(engine, path, db, fs, ending) == {
        b"kept": b"1", b"failed": b"2", b"failed too": b"2", b"after": b"3"}


def test_error_state_reads_stats_and_resume_while_the_cause_persists(engine, scratch):
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = open_db(engine, path, fs)
    for i in range(50):
        db.put(b"k%02d" % i, b"v%02d" % i)
    db.delete(b"k07")
    fs.fail("write", error=errno.ENOSPC, nth=1, sticky=True)
    fs.fail("open", error=errno.ENOSPC, nth=1, sticky=True)
    with pytest.raises(BackgroundError) as first:
        db.put(b"x", b"y")
    assert first.value.errno == errno.ENOSPC
    with pytest.raises(BackgroundError, match="resume") as later:
        db.delete(b"k01")
    assert later.value.errno == errno.ENOSPC
    stats = db.stats()
    assert stats["writes_stopped"] and "28" in stats["background_error"]
    expected = {b"k%02d" % i: b"v%02d" % i for i in range(50) if i != 7}
    assert dict(db.scan()) == expected and db.get(b"k01") == b"v01"
    with db.snapshot() as snap:
        assert snap.get(b"k02") == b"v02"
    for _ in range(2):
        with pytest.raises(BackgroundError, match="resume failed") as info:
            db.resume()
        assert info.value.errno == errno.ENOSPC
        assert db.stats()["writes_stopped"] and dict(db.scan()) == expected
    fs.clear()  # space freed
    db.resume()
    assert not db.stats()["writes_stopped"] and db.stats()["resumes"] == 1
    db.put(b"x", b"z", sync=True)
    db.resume()  # nothing to do
    db.close()
    with open_db(engine, path) as db:
        assert dict(db.scan()) == {**expected, b"x": b"z"}


def test_resume_on_closed_and_read_only_handles(engine, scratch):
    path = os.path.join(scratch, "db")
    db = open_db(engine, path)
    db.put(b"a", b"1")
    db.close()
    with pytest.raises(ClosedError):
        db.resume()
    with open_db(engine, path, read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.resume()


def test_reopen_instead_of_resume(engine, scratch):
    """Closing in the error state and reopening recovers everything
    acknowledged; the failed write is there wholly or not at all."""
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = open_db(engine, path, fs)
    db.put(b"a", b"1", sync=True)
    fs.fail("sync", nth=1)
    with pytest.raises(BackgroundError):
        with db.write_batch(sync=True) as batch:
            batch.put(b"b", b"2")
            batch.put(b"c", b"3")
    db.close()
    with open_db(engine, path) as db:
        assert dict(db.scan()) in ({b"a": b"1"}, {b"a": b"1", b"b": b"2", b"c": b"3"})


# -- lsmkv --------------------------------------------------------------------------------------


def test_lsm_failed_background_flush_stops_writes_until_resume(scratch):
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = lsmkv.open(path, fs=fs, write_buffer_size=4096, compaction_executor="thread")
    fs.fail("sync", path_contains=".sst", nth=1)
    model = {}
    stopped = None
    for i in range(2000):
        try:
            db.put(b"key%04d" % i, b"v" * 40)
        except BackgroundError as exc:
            stopped = exc
            break
        model[b"key%04d" % i] = b"v" * 40
    assert stopped is not None and stopped.errno == errno.EIO
    assert dict(db.scan()) == model
    db.resume()
    db.put(b"after", b"1")
    db.flush()
    assert dict(db.scan()) == {**model, b"after": b"1"}
    db._compactor.wait_idle()
    on_disk = {int(n[:-4]) for n in os.listdir(path) if n.endswith(".sst")}
    assert on_disk == db._state.version.numbers()  # the failed flush's table is gone
    assert not [n for n in os.listdir(path) if n.endswith(".tmp")]
    db.close()
    from lsmkv.lsm.check import check_db
    assert check_db(path).ok
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == {**model, b"after": b"1"}


def test_lsm_torn_manifest_write_gets_a_fresh_manifest(scratch):
    """A manifest append torn halfway: nothing more is appended to that
    manifest (a later record after the torn one would make it unreadable);
    resume() writes a fresh one."""
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = lsmkv.open(path, fs=fs, compaction_executor="thread", disable_auto_compactions=True)
    db.put(b"a", b"1")
    db.flush()
    old_manifest = [n for n in os.listdir(path) if n.startswith("MANIFEST")]
    fs.fail("write", path_contains="MANIFEST", nth=1, torn_prefix=5)
    db.put(b"b", b"2")
    with pytest.raises(BackgroundError):
        db.flush()
    with pytest.raises(BackgroundError):
        db.compact_range()
    db.resume()
    assert [n for n in os.listdir(path) if n.startswith("MANIFEST")] != old_manifest
    db.put(b"c", b"3")
    db.flush()
    db.compact_range()
    db.close()
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == {b"a": b"1", b"b": b"2", b"c": b"3"}


def test_lsm_failed_compaction_stops_writes_until_resume(scratch):
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = lsmkv.open(path, fs=fs, compaction_executor="thread", disable_auto_compactions=True, block_size=256)
    for i in range(300):
        db.put(b"key%04d" % i, b"value %d" % i)
        if i % 100 == 99:
            db.flush()
    fs.fail("read", path_contains=".sst", nth=1)
    with pytest.raises(BackgroundError, match="compaction failed") as info:
        db.compact_range()
    assert info.value.errno == errno.EIO
    with pytest.raises(BackgroundError):
        db.put(b"x", b"1")
    db.resume()
    db.compact_range()
    assert db.stats()["files_per_level"][0] == 0
    assert len(dict(db.scan())) == 300
    db.close()


# -- btree -----------------------------------------------------------------------------------------


def test_btree_failure_inside_a_tree_change_rebuilds_the_tree(scratch):
    """A page read fails in the middle of a put (the pool holds few pages):
    the tree in memory may hold half the change, so the handle rebuilds it
    from the disk and the log before the failed record; reads go on,
    snapshots taken before end, and resume() brings writes back."""
    path = os.path.join(scratch, "db")
    with btree.open(path, page_size=512, cache_size=16 * 512) as db:
        for i in range(400):
            db.put(b"key%04d" % i, b"v%04d" % i)
    fs = FaultInjectionFS()
    db = btree.open(path, fs=fs, page_size=512, cache_size=16 * 512)
    snap = db.snapshot()
    fs.fail("read", path_contains="btree.pages", nth=1)
    failed_at = None
    for i in range(400):
        try:
            db.put(b"key%04d" % i, b"new%04d" % i)
        except BackgroundError as exc:
            assert exc.errno == errno.EIO
            failed_at = i
            break
    assert failed_at is not None
    expected = {b"key%04d" % i: (b"new%04d" if i < failed_at else b"v%04d") % i for i in range(400)}
    assert dict(db.scan()) == expected
    assert db.check_invariants() == []
    with pytest.raises(LsmkvError, match="snapshot ended"):
        snap.get(b"key0001")
    db.resume()
    db.put(b"key0000", b"last")
    db.close()
    expected[b"key0000"] = b"last"
    with btree.open(path) as db:
        assert dict(db.scan()) == expected
    assert btree.check(path).ok


@pytest.mark.parametrize("power_loss_at", ["after resume", "inside resume's checkpoint"])
def test_btree_checkpoint_failed_at_its_meta_page_resumes_safely(scratch, power_loss_at):
    """A checkpoint fails at the fsync of its meta page (its pages are
    durable; the new meta copy was written but may not be): the file holds
    one of two checkpoints. resume() writes the last durable one's meta
    page again to the other copy, then its own checkpoint into slots
    neither uses: a power loss after resume, or one that tears resume's
    own meta page, still opens with every acknowledged write."""
    path = os.path.join(scratch, "db")
    fs = FaultInjectionFS()
    db = btree.open(path, fs=fs, page_size=512, cache_size=64 * 512)
    model = {}
    for i in range(300):
        db.put(b"key%04d" % i, b"v%04d" % i)
        model[b"key%04d" % i] = b"v%04d" % i
    db.flush()
    for rnd in range(2):  # a few checkpoints: free slots that held older pages
        for i in range(rnd, 300, 3):
            db.put(b"key%04d" % i, b"w%d%04d" % (rnd, i))
            model[b"key%04d" % i] = b"w%d%04d" % (rnd, i)
        db.flush()
    for i in range(2, 300, 3):
        db.put(b"key%04d" % i, b"x%04d" % i)
        model[b"key%04d" % i] = b"x%04d" % i
    fs.fail("sync", path_contains="btree.pages", nth=2)  # the pages' fsync passes, the meta page's fails
    with pytest.raises(BackgroundError, match="checkpoint failed"):
        db.flush()
    assert dict(db.scan()) == model
    if power_loss_at == "inside resume's checkpoint":
        fs.fail("sync", path_contains="btree.pages", nth=3)  # resume: meta again, pages, its meta page
        with pytest.raises(BackgroundError):
            db.resume()
    else:
        db.resume()
        db.put(b"extra", b"1", sync=True)
        model[b"extra"] = b"1"
    db._simulate_crash()
    fs.power_loss()
    with btree.open(path) as db:
        assert dict(db.scan()) == model
    assert btree.check(path).ok
