"""Group commit on both engines: the write queue, the log syncer, sync timeouts.

Durability is tested the hard way: on FaultInjectionFS, whose power_loss()
drops everything not fsynced, so a write acknowledged as durable that was
not really synced is lost and the test fails. A stalled disk is a stall on
the file-system layer (FaultInjectionFS.stall), not a mock.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import btree
import lsmkv
from lsmkv.base.errors import BackgroundError, OptionError, SyncTimeoutError
from lsmkv.base.fault_fs import FaultInjectionFS

ENGINES = ("lsm", "btree")
LOG_NAME = {"lsm": ".log", "btree": "btree.log"}


def open_db(engine: str, path: str, **options):
    return (lsmkv if engine == "lsm" else btree).open(path, **options)


def crash_and_lose_power(db, fs: FaultInjectionFS) -> None:
    """The process dies and the machine loses power: only fsynced bytes stay."""
    db._simulate_crash()
    fs.power_loss()


@pytest.mark.parametrize("engine", ENGINES)
def test_sync_writers_pile_up_behind_one_fsync(tmp_path, engine):
    """While the syncer's fsync of one sync write is stalled, seven more
    sync writers queue; one more group -- one append, one fsync -- then
    makes all of them durable."""
    fs = FaultInjectionFS()
    db = open_db(engine, str(tmp_path / "db"), fs=fs)
    db.put(b"warm", b"up", sync=True)  # starts the syncer
    syncs_before = db.stats()["log_syncs"]
    stall = fs.stall("sync", path_contains=LOG_NAME[engine])
    errors = []

    def writer(i):
        try:
            db.put(b"k%d" % i, b"v%d" % i, sync=True)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=writer, args=(0,))
    first.start()
    assert stall.wait_entered(1), "the first sync never reached the disk"
    others = [threading.Thread(target=writer, args=(i,)) for i in range(1, 8)]
    for t in others:
        t.start()
    # The first write is applied and its fsync stalled; the seven others
    # queue for the syncer's next group.
    deadline = time.monotonic() + 30
    while db.stats()["sync_writes_queued"] < 7 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert db.stats()["sync_writes_queued"] == 7
    assert db.get(b"k0") == b"v0"
    stall.release()
    for t in [first, *others]:
        t.join(30)
    assert not errors
    # The stalled fsync covered the first write, one more all seven others.
    assert db.stats()["log_syncs"] - syncs_before <= 2
    crash_and_lose_power(db, fs)
    db = open_db(engine, str(tmp_path / "db"), fs=fs)
    assert [db.get(b"k%d" % i) for i in range(8)] == [b"v%d" % i for i in range(8)]
    db.close()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", [1, 2])
def test_acknowledged_sync_writes_survive_power_loss(tmp_path, engine, seed):
    """Eight threads write sync puts and sync batches of ten keys while the
    power is cut at a random file-system call; after the power loss every
    write that returned is there, and every batch is all there or not at all."""
    import random
    rng = random.Random(seed)
    fs = FaultInjectionFS(seed=seed)
    path = str(tmp_path / "db")
    options = {"write_buffer_size": 64 * 1024} if engine == "lsm" else {"checkpoint_log_bytes": 64 * 1024}
    db = open_db(engine, path, fs=fs, **options)
    acked: list[list[tuple]] = [[] for _ in range(8)]
    stop = threading.Event()

    def writer(t):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                if n % 3:
                    db.put(b"t%d-%06d" % (t, n), b"v%d" % n, sync=True)
                    acked[t].append(("put", n))
                else:
                    with db.write_batch(sync=True) as batch:
                        for j in range(10):
                            batch.put(b"b%d-%06d-%d" % (t, n, j), b"%d" % n)
                    acked[t].append(("batch", n))
            except lsmkv.LsmkvError:
                return  # the power is off

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    fs.cut_power(at_call=rng.randint(1, 200))
    deadline = time.monotonic() + 60
    while fs.powered and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(60)
    assert sum(map(len, acked)) > 50, "too few writes before the power cut to test anything"
    crash_and_lose_power(db, fs)
    db = open_db(engine, path, fs=fs)
    for t in range(8):
        for kind, n in acked[t]:
            if kind == "put":
                assert db.get(b"t%d-%06d" % (t, n)) == b"v%d" % n, f"acknowledged sync put {t}/{n} lost"
            else:
                assert all(db.get(b"b%d-%06d-%d" % (t, n, j)) == b"%d" % n for j in range(10)), \
                    f"acknowledged sync batch {t}/{n} lost"
    batches: dict[bytes, int] = {}
    for key, _ in db.scan(prefix=b"b"):
        batch_id = key.rsplit(b"-", 1)[0]
        batches[batch_id] = batches.get(batch_id, 0) + 1
    assert all(count == 10 for count in batches.values()), "a batch survived in part"
    db.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_sync_timeout_with_a_stalled_disk(tmp_path, engine):
    """A sync write on a stalled disk raises SyncTimeoutError after
    sync_timeout; the write stays applied, writes without sync go on, and
    the next sync that succeeds makes the timed-out write durable too."""
    fs = FaultInjectionFS()
    path = str(tmp_path / "db")
    db = open_db(engine, path, fs=fs, sync_timeout=0.2)
    db.put(b"before", b"1", sync=True)
    stall = fs.stall("sync", path_contains=LOG_NAME[engine])
    with pytest.raises(SyncTimeoutError, match="sync_timeout=0.2") as info:
        db.put(b"stuck", b"2", sync=True)
    # It was taken into a group and applied; only its fsync is stuck.
    assert info.value.applied and info.value.position is not None
    assert isinstance(info.value, TimeoutError)
    assert db.get(b"stuck") == b"2"           # applied, visible
    db.put(b"unsynced", b"3")                 # writers without sync are not held up
    # The syncer is still in the stalled fsync: this one times out while
    # waiting for its turn, and is dropped, never applied.
    with pytest.raises(SyncTimeoutError, match="not applied") as info:
        with db.write_batch(sync=True) as batch:
            batch.put(b"dropped", b"4")
    assert not info.value.applied
    assert db.get(b"dropped") is None
    assert db.stats()["sync_timeouts"] == 2
    stall.release()
    db.put(b"after", b"5", sync=True)         # durable, and everything before it
    assert db.get(b"dropped") is None
    crash_and_lose_power(db, fs)
    db = open_db(engine, path, fs=fs)
    assert [db.get(k) for k in (b"before", b"stuck", b"unsynced", b"dropped", b"after")] == \
        [b"1", b"2", b"3", None, b"5"]
    db.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_log_sync_fails_the_waiters_and_stops_writes(tmp_path, engine):
    fs = FaultInjectionFS()
    path = str(tmp_path / "db")
    db = open_db(engine, path, fs=fs)
    db.put(b"a", b"1", sync=True)
    fs.fail("sync", path_contains=LOG_NAME[engine], nth=1, sticky=True)
    with pytest.raises(BackgroundError, match="sync"):
        db.put(b"b", b"2", sync=True)
    with pytest.raises(BackgroundError, match="stopped"):
        db.put(b"c", b"3")
    assert db.get(b"a") == b"1"
    fs.clear()
    db.resume()
    db.put(b"d", b"4", sync=True)
    crash_and_lose_power(db, fs)
    db = open_db(engine, path, fs=fs)
    assert db.get(b"a") == b"1" and db.get(b"d") == b"4" and db.get(b"c") is None
    db.close()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("options", [{"group_commit": False}, {"commit_delay": 0.01}])
def test_per_write_fsync_and_commit_delay_keep_every_sync_write(tmp_path, engine, options):
    fs = FaultInjectionFS()
    path = str(tmp_path / "db")
    db = open_db(engine, path, fs=fs, **options)
    done = []

    def writer(t):
        for n in range(30):
            db.put(b"%d-%d" % (t, n), b"x", sync=True)
        done.append(t)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(done) == [0, 1, 2, 3]
    stats = db.stats()
    if options.get("group_commit") is False:
        assert stats["log_syncs"] == 0 and stats["synced_writes"] == 0  # each write fsynced itself
    else:
        assert stats["synced_writes"] == 120 and 0 < stats["log_syncs"] <= 120
    crash_and_lose_power(db, fs)
    db = open_db(engine, path, fs=fs)
    assert sum(1 for _ in db.scan()) == 120
    db.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_writes_from_many_threads_keep_each_threads_order(tmp_path, engine):
    """Each thread overwrites its own key with increasing numbers, in
    batches and single puts; through the groups, the last write wins."""
    db = open_db(engine, str(tmp_path / "db"))

    def writer(t):
        for n in range(1, 501):
            if n % 5:
                db.put(b"key%d" % t, b"%06d" % n, sync=n % 50 == 0)
            else:
                with db.write_batch() as batch:
                    batch.put(b"key%d" % t, b"%06d" % n)
                    batch.put(b"twin%d" % t, b"%06d" % n)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [db.get(b"key%d" % t) for t in range(8)] == [b"000500"] * 8
    assert [db.get(b"twin%d" % t) for t in range(8)] == [b"000500"] * 8
    stats = db.stats()
    assert stats["grouped_writes"] >= stats["write_groups"]
    db.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_sync_options_are_validated(tmp_path, engine):
    for bad in ({"sync_timeout": 0}, {"sync_timeout": -1}, {"sync_timeout": "1"}, {"commit_delay": -0.1},
                {"commit_delay": 5}, {"group_commit": "yes"}):
        with pytest.raises(OptionError):
            open_db(engine, str(tmp_path / "db"), **bad)
    assert not os.path.exists(tmp_path / "db") or not os.listdir(tmp_path / "db")
    db = open_db(engine, str(tmp_path / "db"), sync_timeout=None)
    db.put(b"k", b"v", sync=True)
    db.close()


_SIGKILL_CHILD = textwrap.dedent("""
    import os, sys, threading
    engine, path, ack_dir = sys.argv[1:4]
    mod = __import__("lsmkv" if engine == "lsm" else "btree")
    db = mod.open(path)
    def writer(t):
        fd = os.open(os.path.join(ack_dir, f"acks-{t}"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        n = 0
        while True:
            n += 1
            db.put(b"%d-%08d" % (t, n), b"v" * 50, sync=True)
            os.write(fd, b"%d\\n" % n)
    for t in range(8):
        threading.Thread(target=writer, args=(t,), daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()
""")


@pytest.mark.crash
@pytest.mark.parametrize("engine", ENGINES)
def test_eight_sync_writers_killed_lose_nothing_acknowledged(tmp_path, engine):
    """A child process with eight threads doing sync puts is SIGKILLed; every
    put it acknowledged (logged after put() returned) is in the reopened
    database."""
    path, acks = str(tmp_path / "db"), str(tmp_path / "acks")
    os.mkdir(acks)
    for cycle in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _SIGKILL_CHILD, engine, path, acks],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3 + 0.2 * cycle)
        proc.kill()
        proc.wait()
        db = open_db(engine, path)
        total = 0
        for t in range(8):
            name = os.path.join(acks, f"acks-{t}")
            if not os.path.exists(name):
                continue
            with open(name, "rb") as f:
                lines = f.read().split(b"\n")[:-1]
            for n in lines:
                assert db.get(b"%d-%08d" % (t, int(n))) == b"v" * 50, f"acknowledged {t}/{n} lost"
            total += len(lines)
            os.remove(name)
        assert total > 0
        db.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_last_sync_at_close_raises_background_error_and_the_handle_is_closed(engine, tmp_path):
    fs = FaultInjectionFS()
    db = open_db(engine, str(tmp_path / "db"), fs=fs)
    db.put(b"k", b"v")
    fs.fail("sync", nth=1, sticky=True)
    with pytest.raises(lsmkv.BackgroundError) as info:
        db.close()
    assert info.value.errno == errno.EIO
    assert db.closed
    db.close()  # a second close is harmless
