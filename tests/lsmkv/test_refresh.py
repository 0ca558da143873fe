"""A read-only handle catching up with a writer: ``db.refresh()``
(lsmkv/lsm/catch_up.py).

The writer runs in a child process driven over a pipe (each command is
answered once the writer's calls have returned, i.e. its writes are
acknowledged); this test process is the reader. Interleavings that a real
writer hits only by chance (a flush between the reader's reading of the
manifest and of the logs, a compaction deleting a table the reader was
about to open) are forced with a file system whose calls run a hook, the
writer then being another handle in this process.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lsmkv
from lsmkv import ClosedError, CorruptionError
from lsmkv.base.filenames import parse
from lsmkv.base.fs import OsFileSystem
from lsmkv.lsm.wal import HEADER_SIZE, LogReader, LogWriter
from lsmkv.lsm.write_batch import VALUE, encode_batch

#: The writer child: opens the database with the options in argv[2] and
#: runs one JSON command per line of stdin, answering each with one line.
WRITER = r"""
import json, sys
import lsmkv, lsmkv.lsm.version
path, opts = sys.argv[1], json.loads(sys.argv[2])
limit = opts.pop("max_manifest_bytes", None)
if limit:
    lsmkv.lsm.version.MAX_MANIFEST_BYTES = limit   # rotate the manifest often
db = lsmkv.open(path, **opts)
print(json.dumps({"ok": "open"}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    op = cmd["op"]
    try:
        if op == "put":
            for k, v in cmd["items"]:
                db.put(k.encode(), v.encode(), sync=cmd["sync"])
        elif op == "delete":
            for k in cmd["keys"]:
                db.delete(k.encode(), sync=cmd["sync"])
        elif op == "batch":
            with db.write_batch(sync=cmd["sync"]) as batch:
                for k, v in cmd["items"]:
                    batch.put(k.encode(), v.encode())
        elif op == "flush":
            db.flush()
        elif op == "compact":
            db.compact_range()
        elif op == "stream":
            # Keys key000000.. in order, one put each; every 100th is
            # acknowledged on stdout once its put has returned.
            for i in range(cmd["count"]):
                db.put(b"key%06d" % i, b"v%06d" % i)
                if i % 100 == 99 or i == cmd["count"] - 1:
                    print(json.dumps({"acked": i}), flush=True)
        elif op == "close":
            db.close()
            print(json.dumps({"ok": True}), flush=True)
            break
        stats = db.stats()
        print(json.dumps({"ok": True, "last_sequence": stats["last_sequence"], "flush_count": stats["flush_count"],
                          "compactions": stats["compactions"] + stats["trivial_moves"]}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": repr(exc)}), flush=True)
"""


class WriterProcess:
    """A writer in a child process, open once constructed; ``call``
    returns once the writer's calls for the command have returned."""

    def __init__(self, path: str, **options) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER, path, json.dumps(options)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.answer()  # open: the database exists from here on

    def send(self, op: str, **args) -> None:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        assert line, f"the writer exited with {self.proc.wait()}"
        reply = json.loads(line)
        assert "error" not in reply, reply["error"]
        return reply

    def call(self, op: str, **args) -> dict:
        self.send(op, **args)
        return self.answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.call("close")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.proc.stdout.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)
        self.proc.stdin.close()
        self.proc.stdout.close()


#: Small buffers and tables: a few hundred writes flush, rotate the log and compact.
SMALL = dict(write_buffer_size=8 * 1024, target_file_size=8 * 1024, level1_max_bytes=32 * 1024,
             l0_compaction_trigger=2, compaction_executor="thread")


def files_of(path: str, kind: str) -> set[str]:
    return {n for n in os.listdir(path) if (parse(n) or ("", 0))[0] == kind}


def current_manifest(path: str) -> str:
    with open(os.path.join(path, "CURRENT")) as f:
        return f.read().strip()


# ----------------------------------------------------------------------------
# A writer process and a reader process
# ----------------------------------------------------------------------------

@pytest.mark.subprocess
@pytest.mark.parametrize("sync", [True, False], ids=["sync", "not-synced"])
def test_refresh_sees_every_write_the_writer_acknowledged(tmp_path, sync):
    """Every write the writer acknowledged before refresh() -- synced or
    not: a write is handed to the OS before the writer's put returns --
    is seen after it, across memtable flushes, log rotations, compactions,
    manifest rotations and a restart of the writer (whose recovery writes
    a new manifest and deletes the old logs)."""
    path = str(tmp_path / "db")
    writer = WriterProcess(path, **SMALL, max_manifest_bytes=1024)
    writer.call("flush")
    reader = lsmkv.open(path, read_only=True)
    rng = random.Random(11)
    model: dict[bytes, bytes] = {}
    manifests, logs = set(), set()
    flushes = compactions = 0
    try:
        for round_ in range(36):
            items = [("k%04d" % rng.randrange(500), "r%d-%s" % (round_, "x" * rng.randrange(10, 120)))
                     for _ in range(40)]
            gone = ["k%04d" % rng.randrange(500) for _ in range(8)]
            writer.call("put", items=items, sync=sync)
            writer.call("delete", keys=gone, sync=sync)
            last = writer.call("batch", items=items[:5], sync=sync)
            model.update((k.encode(), v.encode()) for k, v in items)
            for k in gone:
                model.pop(k.encode(), None)
            model.update((k.encode(), v.encode()) for k, v in items[:5])
            if round_ % 9 == 8:
                last = writer.call("compact")
            if round_ == 20:
                flushes += last["flush_count"]
                compactions += last["compactions"]
                writer.close()
                writer = WriterProcess(path, **SMALL, max_manifest_bytes=1024)
            manifests.add(current_manifest(path))

            assert reader.refresh() is True
            logs.update(reader.stats()["recovery"]["logs"])  # the logs whose records the view holds
            assert reader.stats()["last_sequence"] == last["last_sequence"]
            assert dict(reader.scan()) == model
            for k in gone:
                assert reader.get(k.encode()) == model.get(k.encode())
            assert reader.refresh() is False  # nothing new
        last = writer.call("flush")
        flushes += last["flush_count"]
        compactions += last["compactions"]
    finally:
        reader.close()
        writer.close()
    # What the reader caught up across:
    assert flushes >= 12 and compactions >= 5 and len(logs) >= 10 and len(manifests) >= 3, \
        (flushes, compactions, len(logs), len(manifests))


@pytest.mark.crash
def test_writes_acknowledged_before_the_writer_was_killed_are_seen(tmp_path):
    """A write that reached the OS (not synced) is in the page cache the
    reader reads, also once the writer process is gone."""
    path = str(tmp_path / "db")
    writer = WriterProcess(path, **SMALL)
    reader = lsmkv.open(path, read_only=True)
    try:
        items = [("k%04d" % i, "v%d" % i) for i in range(600)]
        writer.call("put", items=items, sync=False)
        writer.kill()
        assert reader.refresh() is True
        assert dict(reader.scan()) == {k.encode(): v.encode() for k, v in items}
    finally:
        reader.close()


@pytest.mark.subprocess
def test_refreshes_while_the_writer_writes_see_prefixes_holding_every_acknowledged_write(tmp_path):
    """The writer puts key000000, key000001, ... as fast as it can (small
    memtables: it flushes, rotates logs and compacts all the time) while
    the reader refreshes in a loop: each refresh sees exactly the keys of
    a prefix of the writes (a torn tail, a log or table deleted meanwhile
    never shows), at least up to the last write acknowledged before it."""
    path = str(tmp_path / "db")
    count = 15000
    writer = WriterProcess(path, **SMALL)
    writer.call("flush")
    reader = lsmkv.open(path, read_only=True)
    acked = [-1]
    done = threading.Event()

    def follow_acks() -> None:
        while True:
            reply = writer.answer()
            if "acked" not in reply:
                break
            acked[0] = reply["acked"]
        done.set()

    writer.send("stream", count=count)
    thread = threading.Thread(target=follow_acks)
    thread.start()
    try:
        while True:
            finished = done.is_set()
            before = acked[0]
            reader.refresh()
            keys = [k for k, _ in reader.scan()]
            assert len(keys) >= before + 1
            assert keys == [b"key%06d" % i for i in range(len(keys))]
            assert reader.get(b"key%06d" % len(keys)) is None
            if keys:
                assert reader.get(keys[-1]) == b"v%06d" % (len(keys) - 1)
            if finished:
                break
        assert len(keys) == count
    finally:
        thread.join(timeout=120)
        reader.close()
        writer.close()


@pytest.mark.subprocess
def test_snapshot_scan_and_cursor_taken_before_refresh_keep_their_view(tmp_path):
    """A compaction in the writer drops the versions the reader's snapshot
    sees and deletes their tables; the snapshot, a scan half read and a
    cursor, all taken before the refresh, still read them, unchanged. Once
    they are gone, the next refresh lets go of those tables."""
    path = str(tmp_path / "db")
    writer = WriterProcess(path, **SMALL)
    old = {("k%04d" % i).encode(): ("old%d" % i).encode() * 20 for i in range(300)}
    new = {k: v.replace(b"old", b"new") for k, v in old.items()}
    reader = lsmkv.open(path, read_only=True)
    try:
        writer.call("put", items=[(k.decode(), v.decode()) for k, v in old.items()], sync=False)
        writer.call("compact")
        assert reader.refresh() is True
        old_tables = files_of(path, "table")
        snap = reader.snapshot()
        scan = reader.scan()
        first = [next(scan) for _ in range(10)]
        cursor = reader.iterator()
        cursor.seek_to_last()

        writer.call("put", items=[(k.decode(), v.decode()) for k, v in new.items()], sync=True)
        writer.call("compact")
        assert not old_tables & files_of(path, "table"), "the compaction should have deleted the old tables"
        assert reader.refresh() is True

        assert dict(reader.scan()) == new
        assert dict(snap.scan()) == old
        assert all(snap.get(k) == v for k, v in old.items())
        assert dict(first + list(scan)) == old
        assert (cursor.key(), cursor.value()) == max(old.items())
        cursor.prev()
        assert cursor.value() == old[cursor.key()]
        with snap.iterator() as it:
            it.seek(b"k0150")
            assert (it.key(), it.value()) == (b"k0150", old[b"k0150"])

        snap.close()
        del snap, scan, cursor
        assert reader.refresh() is False
        assert reader.stats()["open_tables"] == len(files_of(path, "table"))
    finally:
        reader.close()
        writer.close()


def test_a_read_that_took_the_sequence_before_a_refresh_published_its_state(db_path):
    """get(), scan() and iterator() read the sequence, then the read state.
    A refresh can publish its state in between: the writer's compactions
    may have dropped versions an older sequence would need from it, so
    such a read reads at the state's floor (the refresh's sequence). Here
    the writer's compaction keeps k's new version with its sequence (a
    writer snapshot older than both) and drops the old one; a read at the
    sequence taken before the refresh would find neither."""
    with lsmkv.open(db_path, disable_auto_compactions=True) as writer:
        writer.put(b"other", b"1")
        with writer.snapshot():
            writer.put(b"k", b"old")
            writer.flush()
            reader = lsmkv.open(db_path, read_only=True)
            try:
                seq_before = reader.stats()["last_sequence"]
                writer.put(b"k", b"new")
                writer.compact_range()
                assert reader.refresh() is True
                # What a read whose thread took the sequence just before the refresh published its state does:
                assert dict(reader._scan(None, None, False, None, seq_before)) == {b"other": b"1", b"k": b"new"}
                assert reader._get_at(b"k", seq_before, None) == b"new"
                with reader._iterator(seq_before, None, None, reader._check_open) as it:
                    it.seek(b"k")
                    assert (it.key(), it.value()) == (b"k", b"new")
            finally:
                reader.close()


# ----------------------------------------------------------------------------
# The log a writer is appending to
# ----------------------------------------------------------------------------

def unflushed_log(path: str, count: int) -> str:
    """A database whose last ``count`` puts are only in its (closed) log."""
    with lsmkv.open(path) as db:
        for i in range(count):
            db.put(b"k%04d" % i, b"v%04d" % i)
    (name,) = files_of(path, "log")
    return os.path.join(path, name)


def last_record_offset(log_path: str) -> int:
    with open(log_path, "rb") as f:
        return [offset for offset, _ in LogReader(f.read(), log_path).records()][-1]


def test_the_log_reader_goes_on_from_where_it_stopped(tmp_path):
    """Reading from a record boundary part-way through a log (the block
    holding it and what follows, as a refresh reads) gives the records
    from there on, at their file offsets, and ``end`` where to go on."""
    path = str(tmp_path / "000001.log")
    log = LogWriter(OsFileSystem().create(path))
    rng = random.Random(3)
    for i in range(300):  # records of up to 1 KiB, some fragmented over blocks
        log.add_record(b"%d:" % i + bytes(rng.randrange(1, 1000)))
    log.close()
    with open(path, "rb") as f:
        data = f.read()
    whole = LogReader(data, path)
    records = list(whole.records())
    assert whole.end == len(data) and len(records) == 300
    for i in (0, 1, 45, 100, 299):
        start = records[i][0]
        origin = start - start % (32 * 1024)
        reader = LogReader(data[origin:], path, origin=origin, start=start, in_progress=True)
        assert list(reader.records()) == records[i:]
        assert reader.end == len(data)
    cut = records[200][0] + 5  # a reader sees the file up to inside record 200
    reader = LogReader(data[:cut], path, in_progress=True)
    assert list(reader.records()) == records[:200] and reader.end == records[200][0]
    assert reader.report.torn_tail_bytes == 0


def test_a_record_the_writer_is_appending_ends_the_view_quietly(db_path):
    """The last record as a reader can see it while the writer copies it
    in: its header's checksum not there yet, its bytes are, nothing after
    it. The writer's recovery would call that corruption; a reader stops
    there, and the next refresh reads it once it is whole."""
    log_path = unflushed_log(db_path, 30)
    at = last_record_offset(log_path)
    with open(log_path, "r+b") as f:
        f.seek(at)
        header = f.read(4)
        f.seek(at)
        f.write(b"\0\0\0\0")
    with lsmkv.open(db_path, read_only=True) as reader:
        assert reader.get(b"k0028") == b"v0028" and reader.get(b"k0029") is None
        assert reader.refresh() is False
        with open(log_path, "r+b") as f:
            f.seek(at)
            f.write(header)
        assert reader.refresh() is True
        assert reader.get(b"k0029") == b"v0029"
        assert len(list(reader.scan())) == 30


def test_a_record_seen_half_copied_with_records_after_it_is_read_again(db_path):
    """A reader's read of the log can race the writer's copy of an append
    into it: the record's header not there yet when that part was read,
    the appends after it there when theirs was. The damage is gone at a
    second read, so it is not reported; damage still there then is."""
    log_path = unflushed_log(db_path, 30)
    with open(log_path, "rb") as f:
        at = [offset for offset, _ in LogReader(f.read(), log_path).records()][20]
    with open(log_path, "r+b") as f:
        f.seek(at)
        header = f.read(4)
        f.seek(at)
        f.write(b"\0\0\0\0")

    def finish_the_copy():
        with open(log_path, "r+b") as f:
            f.seek(at)
            f.write(header)

    fs = HookedFS()
    opens = []
    fs.hook = lambda call, path: (opens.append(path), len(opens) == 2 and finish_the_copy()) \
        if call == "open" and path == log_path else None
    with lsmkv.open(db_path, read_only=True, fs=fs) as reader:
        assert len(opens) == 2
        assert dict(reader.scan()) == {b"k%04d" % i: b"v%04d" % i for i in range(30)}


def test_a_record_cut_short_ends_the_view_quietly(db_path):
    log_path = unflushed_log(db_path, 30)
    size = os.path.getsize(log_path)
    with open(log_path, "rb") as f:
        tail = f.read()[size - 5:]
    with open(log_path, "r+b") as f:
        f.truncate(size - 5)
    with lsmkv.open(db_path, read_only=True) as reader:
        assert reader.get(b"k0029") is None and reader.get(b"k0028") == b"v0028"
        with open(log_path, "ab") as f:
            f.write(tail)
        assert reader.refresh() is True
        assert reader.get(b"k0029") == b"v0029"


def test_damage_followed_by_intact_records_is_corruption(db_path):
    """As for the writer's recovery: a checksum failure with intact records
    after it raises (naming the file and offset) on open and on refresh,
    and leaves the view as it was; salvage skips the damaged record."""
    log_path = unflushed_log(db_path, 30)
    with open(log_path, "rb") as f:
        offsets = [offset for offset, _ in LogReader(f.read(), log_path).records()]
    flip_at = offsets[20] + HEADER_SIZE + 3

    def flip() -> None:
        with open(log_path, "r+b") as f:
            f.seek(flip_at)
            byte = f.read(1)
            f.seek(flip_at)
            f.write(bytes([byte[0] ^ 0x10]))

    with lsmkv.open(db_path, read_only=True) as reader:
        flip()
        # The reader had read the log whole: nothing new to read, nothing to judge.
        assert reader.refresh() is False
    with pytest.raises(CorruptionError, match="checksum mismatch") as info:
        lsmkv.open(db_path, read_only=True)
    assert info.value.path == log_path and info.value.offset == offsets[20]
    with lsmkv.open(db_path, read_only=True, wal_recovery_mode="salvage") as reader:
        assert reader.get(b"k0020") is None and reader.get(b"k0029") == b"v0029"
        assert reader.stats()["recovery"]["dropped"][0][:2] == (log_path, offsets[20])

    # Damage in what a refresh reads: it raises, and the view stays.
    flip()
    size = os.path.getsize(log_path)
    with open(log_path, "rb") as f:
        tail = f.read()[offsets[10]:]
    with open(log_path, "r+b") as f:
        f.truncate(offsets[10])
    with lsmkv.open(db_path, read_only=True) as reader:
        assert len(list(reader.scan())) == 10
        with open(log_path, "ab") as f:
            f.write(tail)
        flip()
        assert os.path.getsize(log_path) == size
        with pytest.raises(CorruptionError, match="checksum mismatch"):
            reader.refresh()
        assert len(list(reader.scan())) == 10 and reader.get(b"k0009") == b"v0009"


# ----------------------------------------------------------------------------
# Files vanishing between the steps of a catch-up
# ----------------------------------------------------------------------------

class HookedFS(OsFileSystem):
    """The real file system; ``hook(call, path)`` runs before every
    listdir and open for reading (it decides when to act)."""

    def __init__(self) -> None:
        self.hook = None

    def listdir(self, path):
        if self.hook is not None:
            self.hook("listdir", path)
        return super().listdir(path)

    def open_readable(self, path):
        if self.hook is not None:
            self.hook("open", path)
        return super().open_readable(path)


def once(condition, action):
    """A hook that runs ``action`` the first time ``condition(call, path)`` holds."""
    fired = []

    def hook(call, path):
        if not fired and condition(call, path):
            fired.append(True)
            action()
    hook.fired = fired
    return hook


def test_a_flush_between_reading_the_manifest_and_listing_the_logs(db_path):
    """The writer flushes (and deletes the flushed log) after the reader
    read the manifest and before it lists the logs: the listing lacks the
    log, the manifest read lacks the table; the reader notices the moved
    log number and reads again."""
    fs = HookedFS()
    with lsmkv.open(db_path, disable_auto_compactions=True) as writer:
        writer.put(b"a", b"1")
        reader = lsmkv.open(db_path, read_only=True, fs=fs)
        try:
            writer.put(b"b", b"2")
            fs.hook = once(lambda call, path: call == "listdir", writer.flush)
            assert reader.refresh() is True
            assert fs.hook.fired
            assert reader.get(b"a") == b"1" and reader.get(b"b") == b"2"
        finally:
            reader.close()


def test_a_flush_between_listing_a_log_and_reading_it(db_path):
    fs = HookedFS()
    with lsmkv.open(db_path, disable_auto_compactions=True) as writer:
        writer.put(b"a", b"1")
        reader = lsmkv.open(db_path, read_only=True, fs=fs)
        try:
            writer.put(b"b", b"2")
            fs.hook = once(lambda call, path: call == "open" and path.endswith(".log"), writer.flush)
            assert reader.refresh() is True
            assert fs.hook.fired
            assert reader.get(b"b") == b"2"
        finally:
            reader.close()


def test_a_compaction_deletes_a_table_the_reader_was_about_to_open(db_path):
    fs = HookedFS()
    with lsmkv.open(db_path, disable_auto_compactions=True) as writer:
        reader = lsmkv.open(db_path, read_only=True, fs=fs)
        try:
            for i in range(3):
                writer.put(b"k%d" % i, b"v%d" % i)
                writer.flush()
            fs.hook = once(lambda call, path: call == "open" and path.endswith(".sst"), writer.compact_range)
            assert reader.refresh() is True
            assert fs.hook.fired
            assert dict(reader.scan()) == {b"k0": b"v0", b"k1": b"v1", b"k2": b"v2"}
        finally:
            reader.close()


def test_an_ingest_recorded_after_the_manifest_was_read(db_path, tmp_path):
    """Writes read from the log came after an ingest the manifest read did
    not hold yet: the reader reads again rather than show them without it."""
    fs = HookedFS()
    table = str(tmp_path / "in.sst")
    with lsmkv.TableWriter(table) as w:
        w.put(b"ingested", b"yes")
        w.finish()
    with lsmkv.open(db_path, disable_auto_compactions=True) as writer:
        reader = lsmkv.open(db_path, read_only=True, fs=fs)
        try:
            def ingest_then_write():
                writer.ingest([table])
                writer.put(b"after", b"ingest")

            fs.hook = once(lambda call, path: call == "listdir", ingest_then_write)
            assert reader.refresh() is True
            assert reader.get(b"after") == b"ingest" and reader.get(b"ingested") == b"yes"
        finally:
            reader.close()


def test_a_table_missing_for_good_is_corruption(db_path):
    with lsmkv.open(db_path) as writer:
        writer.put(b"a", b"1")
        reader = lsmkv.open(db_path, read_only=True)
        try:
            writer.put(b"b", b"2")
            writer.flush()
            (table,) = files_of(db_path, "table")
            os.remove(os.path.join(db_path, table))
            with pytest.raises(CorruptionError, match=f"table {table} .* is missing"):
                reader.refresh()
            assert reader.get(b"a") == b"1" and reader.get(b"b") is None
        finally:
            reader.close()


# ----------------------------------------------------------------------------
# The handle
# ----------------------------------------------------------------------------

def test_refresh_on_a_writable_handle_does_nothing(db):
    db.put(b"k", b"v")
    assert db.refresh() is False
    assert db.get(b"k") == b"v"


def test_refresh_on_a_closed_handle_raises(db_path):
    with lsmkv.open(db_path) as writer:
        writer.put(b"k", b"v")
    reader = lsmkv.open(db_path, read_only=True)
    reader.close()
    with pytest.raises(ClosedError):
        reader.refresh()


def test_refresh_writes_and_removes_nothing(db_path):
    with lsmkv.open(db_path, **SMALL) as writer:
        reader = lsmkv.open(db_path, read_only=True)
        try:
            for i in range(400):
                writer.put(b"k%04d" % i, b"v" * 50)
            writer.flush()
            names = {n: os.path.getsize(os.path.join(db_path, n)) for n in os.listdir(db_path)}
            assert reader.refresh() is True
            reader.close()
            assert {n: os.path.getsize(os.path.join(db_path, n)) for n in os.listdir(db_path)} == names
        finally:
            reader.close()


def test_metadata_entries_follow_the_writer(db_path):
    """Metadata entries (``set_meta``) come with their batch, from the log
    and, once flushed, from the manifest; a refresh that fails shows none
    of what it read."""
    with lsmkv.open(db_path, disable_auto_compactions=True) as writer:
        reader = lsmkv.open(db_path, read_only=True)
        try:
            with writer.write_batch() as batch:
                batch.put(b"k", b"1")
                batch.set_meta("offset", b"10")
            assert reader.get_meta("offset") is None
            assert reader.refresh() is True
            assert reader.get_meta("offset") == b"10" and reader.get(b"k") == b"1"
            writer.flush()  # the entry moves to the manifest
            with writer.write_batch() as batch:
                batch.set_meta("offset", b"20")
                batch.set_meta("other", b"x")
            assert reader.refresh() is True
            assert reader.meta() == {"offset": b"20", "other": b"x"}
            writer.flush()
            assert reader.refresh() is False
            assert reader.meta() == {"offset": b"20", "other": b"x"}

            # A refresh reads the entry from the writer's log, then fails on
            # damage in a newer log (records after it intact).
            with writer.write_batch() as batch:
                batch.put(b"j", b"2")
                batch.set_meta("offset", b"30")
            (live,) = files_of(db_path, "log")
            damaged = os.path.join(db_path, "%06d.log" % (int(live[:-4]) + 100))
            log = LogWriter(OsFileSystem().create(damaged))
            for seq in (100, 101, 102):
                log.add_record(encode_batch(seq, [(VALUE, b"z%d" % seq, b"v")]))
            log.close()
            with open(damaged, "r+b") as f:
                f.seek(HEADER_SIZE + 2)
                f.write(b"\xff")
            with pytest.raises(CorruptionError, match="checksum mismatch"):
                reader.refresh()
            assert reader.get_meta("offset") == b"20" and reader.get(b"j") is None
            os.remove(damaged)
            assert reader.refresh() is True
            assert reader.get_meta("offset") == b"30" and reader.get(b"j") == b"2"

            # A refresh reads a flush's entry from the manifest, then fails:
            # the table the flush wrote is gone.
            before = files_of(db_path, "table")
            with writer.write_batch() as batch:
                batch.put(b"i", b"3")
                batch.set_meta("offset", b"40")
                batch.set_meta("fresh", b"y")
            writer.flush()
            (table,) = files_of(db_path, "table") - before
            os.remove(os.path.join(db_path, table))
            with pytest.raises(CorruptionError, match=f"table {table} .* is missing"):
                reader.refresh()
            assert reader.get_meta("offset") == b"30" and reader.get_meta("fresh") is None
            assert reader.meta() == {"offset": b"30", "other": b"x"}
        finally:
            reader.close()


def test_checkpoint_of_a_refreshed_reader_holds_its_view(db_path, tmp_path):
    with lsmkv.open(db_path, **SMALL) as writer:
        reader = lsmkv.open(db_path, read_only=True)
        try:
            for i in range(300):
                writer.put(b"k%04d" % i, b"v%d" % i)
            writer.delete(b"k0007")
            reader.refresh()
            expected = dict(reader.scan())
            reader.checkpoint(str(tmp_path / "cp"))
        finally:
            reader.close()
    with lsmkv.open(str(tmp_path / "cp"), read_only=True) as cp:
        assert dict(cp.scan()) == expected and b"k0007" not in expected


# ----------------------------------------------------------------------------
# Random interleavings (one process: the writer is another handle)
# ----------------------------------------------------------------------------

_ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 40), st.integers(0, 200)),
    st.tuples(st.just("delete"), st.integers(0, 40), st.just(0)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("compact"), st.just(0), st.just(0)),
    st.tuples(st.just("refresh"), st.just(0), st.just(0)),
    st.tuples(st.just("snapshot"), st.just(0), st.just(0)),
), max_size=60)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops)
def test_random_interleavings_of_writes_maintenance_and_refreshes(ops):
    """After each refresh the reader reads exactly the writer's data; each
    snapshot of the reader keeps reading what it saw when taken."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "db")
        with lsmkv.open(path, write_buffer_size=2048, target_file_size=2048, level1_max_bytes=8192,
                        l0_compaction_trigger=2, compaction_executor="thread") as writer:
            reader = lsmkv.open(path, read_only=True)
            model: dict[bytes, bytes] = {}
            seen: dict[bytes, bytes] = {}
            snapshots = []
            try:
                for op, k, size in ops:
                    key = b"k%02d" % k
                    if op == "put":
                        value = b"%d:" % len(model) + b"x" * size
                        writer.put(key, value)
                        model[key] = value
                    elif op == "delete":
                        writer.delete(key)
                        model.pop(key, None)
                    elif op == "flush":
                        writer.flush()
                    elif op == "compact":
                        writer.compact_range()
                    elif op == "refresh":
                        reader.refresh()
                        seen = dict(model)
                    else:
                        snapshots.append((reader.snapshot(), dict(seen)))
                    assert dict(reader.scan()) == seen
                reader.refresh()
                assert dict(reader.scan()) == model
                for snap, expected in snapshots:
                    assert dict(snap.scan()) == expected
                    assert all(snap.get(key) == value for key, value in expected.items())
            finally:
                for snap, _ in snapshots:
                    snap.close()
                reader.close()
