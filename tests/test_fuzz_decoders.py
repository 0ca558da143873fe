"""Fuzzing every decoder that reads bytes from disk, in both engines.

Each decoder is fed random bytes and mutations of real encodings (bit flips,
bytes set, 32- and 64-bit length fields set to huge values, truncations,
insertions, deletions). Where a checksum guards the bytes, a second variant
recomputes the checksum after mutating, so that the structure behind it is
exercised too. Every case must end in one of two ways: the decoder returns
(the input was valid) or raises CorruptionError (InvalidDatabaseError for a
format-version field newer than the code). Any other exception fails the
test, and so does a case that runs longer than ``TIME_LIMIT`` seconds or
allocates more than ``memory_budget`` bytes at its peak (tracemalloc).

Cases run per decoder are counted and printed at the end of the session
(``fuzz cases run``). The default run does ``EXAMPLES`` (40) cases per test;
``--hypothesis-profile fuzz`` runs many more (tests/conftest.py; see
docs/reliability.md for the figures).
"""

from __future__ import annotations

import bisect
import functools
import os
import shutil
import signal
import struct
import tempfile
import tracemalloc
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import btree
import lsmkv
from btree.node import (HEADER as PAGE_HEADER, PAGE_FREELIST, PAGE_INTERNAL, PAGE_LEAF, PAGE_MAP, PAGE_MAPDIR,
                        PAGE_META, PAGE_OVERFLOW, PAGE_TYPE_NAMES, decode_freelist, decode_node, decode_numbers,
                        decode_overflow, encode_freelist, read_leaf_image)
from btree.pager import LOG_FILE, PAGES_FILE, decode_journal, decode_meta, encode_journal
from btree.wal import FRAME, LOG_HEADER_SIZE, decode_batch as btree_decode_batch, parse_log
from lsmkv.base.checksum import crc32
from lsmkv.base.cursor import visible_entries
from lsmkv.base.errors import CorruptionError, InvalidDatabaseError
from lsmkv.base.filenames import CURRENT
from lsmkv.base.fs import DEFAULT_FS
from lsmkv.lsm.cache import BlockCache
from lsmkv.lsm.check import check_db, verify_table
from lsmkv.lsm.cursor import table_source
from lsmkv.lsm.table.block import (CODEC_LENGTHS, CONTINUE, check_block, decode_block, entries_after, fixed_widths,
                                   search_block)
from lsmkv.lsm.table.bloom import BloomFilter
from lsmkv.lsm.table.columns import Columns
from lsmkv.lsm.table.format import FOOTER_SIZE, TRAILER, TRAILER_SIZE, Footer, decode_stored_block
from lsmkv.lsm.table.properties import TableProperties
from lsmkv.lsm.table.range_del_block import decode_range_dels, encode_range_dels
from lsmkv.lsm.range_tombstones import FragmentedTombstones
from lsmkv.lsm.table.reader import PROMOTE_AFTER, TableReader
from lsmkv.lsm.ttl_value import with_deadline
from lsmkv.lsm.version import VersionEdit, VersionSet
from lsmkv.lsm.wal import LogReader, LogWriter
from lsmkv.lsm.write_batch import decode_batch, encode_batch

#: Many cases per decoder: seconds each, out of the fast tier.
pytestmark = pytest.mark.slow

#: Seconds one case may take (generous: the machine may be busy).
TIME_LIMIT = 20.0
_U32 = struct.Struct("<I")


#: Bytes a decoder may allocate per byte of input, beyond a fixed 16 MiB:
#: what it rules out is trusting a length field (2**40) and allocating what
#: it claims. Decoders that inflate zstandard frames get zstandard's largest
#: expansion (32,768-fold) instead.
PER_BYTE = 64
PER_BYTE_ZSTD = 32_768


def memory_budget(size: int, per_byte: int = PER_BYTE) -> int:
    """Most bytes a decoder may allocate at its peak for ``size`` bytes of input."""
    return 16 * 1024 * 1024 + per_byte * size


class Hang(BaseException):
    """A case ran past TIME_LIMIT."""


def _alarm(signum, frame):
    raise Hang(f"a decoder ran longer than {TIME_LIMIT} s")


@contextmanager
def _guarded():
    tracemalloc.start()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        tracemalloc.stop()


def run_case(counter, name: str, decode, data: bytes, allowed=(CorruptionError,), per_byte: int = PER_BYTE) -> None:
    """Run one fuzz case: ``decode(data)`` may return or raise ``allowed``."""
    counter[name] += 1
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        decode(data)
    except allowed:
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    peak = tracemalloc.get_traced_memory()[1] - base
    assert peak <= memory_budget(len(data), per_byte), f"{name}: {peak} bytes allocated for {len(data)} bytes of input"


@pytest.fixture(scope="module", autouse=True)
def guarded():
    with _guarded():
        yield


VERSIONED = (CorruptionError, InvalidDatabaseError)

# ---------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------

_HUGE_32 = [0, 1, 0x7F, 0xFF, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
_HUGE_64 = _HUGE_32 + [1 << 40, (1 << 56) - 1, 1 << 63, (1 << 64) - 1]


@st.composite
def mutations(draw, base: bytes, *, keep_size: bool = False, region: tuple[int, int] | None = None) -> bytes:
    """``base`` with one to four mutations. ``keep_size``: only mutations that
    keep the length; ``region``: (start, end) where they land."""
    data = bytearray(base)
    lo, hi = region if region is not None else (0, len(data))
    ops = ["flip", "byte", "u32", "u64"] if keep_size else ["flip", "byte", "u32", "u64", "truncate", "insert",
                                                             "delete"]
    for _ in range(draw(st.integers(1, 4))):
        if hi <= lo:
            break
        op = draw(st.sampled_from(ops))
        pos = draw(st.integers(lo, hi - 1))
        if op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            data[pos] = draw(st.integers(0, 255))
        elif op == "u32" and pos + 4 <= hi:
            data[pos:pos + 4] = _U32.pack(draw(st.sampled_from(_HUGE_32) | st.integers(0, 2**32 - 1)))
        elif op == "u64" and pos + 8 <= hi:
            data[pos:pos + 8] = struct.pack("<Q", draw(st.sampled_from(_HUGE_64) | st.integers(0, 2**64 - 1)))
        elif op == "truncate":
            del data[pos:]
            hi = min(hi, len(data))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 16))]
            hi = min(hi, len(data))
    return bytes(data)


def inputs(bases: list[bytes], max_random: int = 512):
    """Random bytes, or a mutation of one of ``bases``."""
    return st.one_of(st.binary(max_size=max_random), st.sampled_from(bases).flatmap(mutations))


# ---------------------------------------------------------------------------
# Real encodings, made once per session
# ---------------------------------------------------------------------------


def _once(fn):
    """Compute ``fn(samples)`` once per Samples (hypothesis calls it per case)."""
    @functools.wraps(fn)
    def cached(samples):
        if fn.__name__ not in samples.cache:
            samples.cache[fn.__name__] = fn(samples)
        return samples.cache[fn.__name__]
    return cached


class Samples:
    """Real files of both engines, written by the engines themselves."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.cache: dict = {}
        # lsmkv: a database with tables (compressed and not), a manifest and a log.
        self.lsm_plain = self._lsm_table(os.path.join(root, "plain"), compression=None)
        self.lsm_zstd = self._lsm_table(os.path.join(root, "zstd"), compression="zstd")
        self.lsm_dir = os.path.join(root, "zstd")
        self.manifest = self._read_manifest(self.lsm_dir)
        self.log = self._lsm_log(os.path.join(root, "log"))
        self.batches = [encode_batch(7, [(1, b"key", b"value"), (0, b"gone", b"")]),
                        encode_batch(9, [(2, b"expiring", with_deadline(1 << 41, b"value")), (2, b"k", bytes(8))]),
                        encode_batch(1 << 40, [(1, b"k%d" % i, b"v" * i) for i in range(20)]),
                        encode_batch(5, [(1, b"k", b"v"), (3, b"offsets/p0", b"1234")]),  # a metadata entry
                        encode_batch(6, [(5, b"a", b"m"), (1, b"c", b"v")]),  # a range tombstone
                        encode_batch(3, [])]
        # btree: a database with internal, leaf, overflow and free-list pages, and a log.
        self.bt_dir = os.path.join(root, "bt")
        self.bt_pages, self.bt_log = self._btree(self.bt_dir)

    # -- lsmkv ----------------------------------------------------------------

    @staticmethod
    def _lsm_table(path: str, compression) -> bytes:
        with lsmkv.open(path, compression=compression, block_size=256, write_buffer_size=1 << 20,
                        disable_auto_compactions=True) as db:
            for i in range(300):
                # Every third with a ttl: a version-2 table with kind-2 entries.
                db.put(b"key%05d" % i, b"value-%d" % i * (i % 5), ttl=1e6 if i % 3 == 0 else None)
            for i in range(0, 300, 7):
                db.delete(b"key%05d" % i)
            with db.write_batch() as b:  # metadata: manifest tag 9 once flushed
                b.set_meta("offsets/p0", b"%d" % 300)
            db.flush()
            db.put(b"in-the-log", b"x")
        names = [n for n in os.listdir(path) if n.endswith(".sst")]
        with open(os.path.join(path, names[0]), "rb") as f:
            return f.read()

    @staticmethod
    def _read_manifest(path: str) -> bytes:
        with open(os.path.join(path, CURRENT)) as f:
            name = f.read().strip()
        with open(os.path.join(path, name), "rb") as f:
            return f.read()

    @staticmethod
    def _lsm_log(path: str) -> bytes:
        os.makedirs(path)
        log_path = os.path.join(path, "000001.log")
        writer = LogWriter(DEFAULT_FS.create(log_path))
        writer.add_record(encode_batch(1, [(1, b"a", b"1")]))
        writer.add_record(encode_batch(2, [(1, b"b" * 40000, b"2" * 10)]))  # fragmented over blocks
        writer.add_record(encode_batch(3, [(0, b"a", b"")]))
        writer.add_record(encode_batch(4, [(2, b"c", with_deadline(1 << 41, b"3"))]))
        writer.add_record(encode_batch(5, [(3, b"offsets/p1", b"77")]))
        writer.close()
        with open(log_path, "rb") as f:
            return f.read()

    # -- btree ------------------------------------------------------------------

    @staticmethod
    def _btree(path: str) -> tuple[bytes, bytes]:
        with btree.open(path, page_size=512) as db:
            for i in range(400):
                # Every fifth with a ttl: leaf cells with deadlines (format version 2).
                db.put(b"key%05d" % i, b"v%d" % i * (i % 7), ttl=1e6 if i % 5 == 0 else None)
            db.put(b"big", b"B" * 3000)  # an overflow chain
            db.put(b"big-ttl", b"T" * 3000, ttl=1e6)  # an overflow chain behind a deadline
            for i in range(100, 300):
                db.delete(b"key%05d" % i)  # merges: free pages
            db.flush()
            for i in range(300, 350):
                db.put(b"key%05d" % i, b"w")  # pages moved to other slots: stale images in free ones
            with db.write_batch() as b:  # metadata: a chain the meta page names
                b.set_meta("offsets/p0", b"o" * 700)
            db.flush()
            db.put(b"logged", b"1")
            db.put(b"logged-ttl", b"2", ttl=1e6)
            with db.write_batch() as b:
                b.put(b"x", b"y")
                b.put(b"x-ttl", b"z", ttl=1e6)
                b.delete(b"key00001")
                b.set_meta("offsets/p1", b"2")
            with open(os.path.join(path, LOG_FILE), "rb") as f:
                log = f.read()
        with open(os.path.join(path, PAGES_FILE), "rb") as f:
            pages = f.read()
        return pages, log

    @_once
    def lsm_blocks(self) -> list[tuple[int, int]]:
        """(offset, size) of every stored block of the uncompressed table, trailers excluded."""
        path = os.path.join(self.root, "plain-table.sst")
        with open(path, "wb") as f:
            f.write(self.lsm_plain)
        reader = TableReader(DEFAULT_FS, path, 1, cache=None)
        try:
            footer = Footer.decode(self.lsm_plain[-FOOTER_SIZE:], path, len(self.lsm_plain))
            blocks = list(zip(reader.index_offsets, reader.index_sizes))
            blocks += [footer.filter, footer.properties, footer.index]
        finally:
            reader.close()
        return blocks

    @_once
    def btree_page_images(self) -> dict[int, list[tuple[int, bytes]]]:
        """Page images of the btree sample by type: {type: [(page number
        its header names, image)]} (every intact image in the file,
        including stale ones in free slots), plus a free-list page, which
        format 4 reads in format-3 files but no longer writes."""
        ps = 512
        out: dict[int, list[tuple[int, bytes]]] = {}
        for slot in range(len(self.bt_pages) // ps):
            img = self.bt_pages[slot * ps:(slot + 1) * ps]
            hdr = PAGE_HEADER.unpack_from(img, 0)
            if hdr[0] == crc32(img[4:]):
                out.setdefault(hdr[2], []).append((hdr[1], img))
        out[PAGE_FREELIST] = [(9, bytes(encode_freelist(9, [3, 4, 12, 40], 11, ps, 2)))]
        return out


@pytest.fixture(scope="module")
def samples():
    root = tempfile.mkdtemp(prefix="lsmkv-fuzz-")
    try:
        yield Samples(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def workdir():
    path = tempfile.mkdtemp(prefix="lsmkv-fuzz-work-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


#: Cases per test: a quick 40 in the default run; with --hypothesis-profile
#: fuzz (or any other profile) the profile's max_examples.
EXAMPLES = 40 if settings.get_current_profile_name() == "default" else settings.default.max_examples
FUZZ = settings(deadline=None, max_examples=EXAMPLES,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


def _fix_crc_at(data: bytearray, start: int, end: int) -> None:
    """Recompute the trailer of the stored table block whose payload is
    data[start:end]: the crc of the type byte followed by the payload."""
    TRAILER.pack_into(data, end, data[end], crc32(bytes(data[start:end]), crc32(bytes(data[end:end + 1]))))


# ---------------------------------------------------------------------------
# lsmkv: the log, write batches
# ---------------------------------------------------------------------------


def _read_log(data: bytes, salvage: bool) -> None:
    for offset, payload in LogReader(data, "fuzz.log", salvage=salvage).records():
        decode_batch(payload, "fuzz.log", offset)


@FUZZ
@given(st.data(), st.booleans())
def test_wal_log_reader(fuzz_counter, samples, data, salvage):
    raw = data.draw(st.one_of(st.binary(max_size=40_000), mutations(samples.log)))
    run_case(fuzz_counter, f"lsmkv wal LogReader ({'salvage' if salvage else 'strict'})",
             lambda d: _read_log(d, salvage), raw)


@FUZZ
@given(st.data())
def test_write_batch_decode(fuzz_counter, samples, data):
    raw = data.draw(inputs(samples.batches))
    run_case(fuzz_counter, "lsmkv write batch decode", lambda d: decode_batch(d, "fuzz.log", 0), raw)


# ---------------------------------------------------------------------------
# lsmkv: tables
# ---------------------------------------------------------------------------


@FUZZ
@given(st.data())
def test_table_footer_decode(fuzz_counter, samples, data):
    footer = samples.lsm_plain[-FOOTER_SIZE:]
    raw = data.draw(st.one_of(st.binary(min_size=FOOTER_SIZE, max_size=FOOTER_SIZE),
                              mutations(footer, keep_size=True),
                              mutations(footer, keep_size=True, region=(0, 52)).map(_refooter)))
    run_case(fuzz_counter, "lsmkv table footer", lambda d: Footer.decode(d, "fuzz.sst", 4096), raw,
             allowed=VERSIONED)


def _refooter(footer: bytes) -> bytes:
    """A footer with its checksum recomputed after a mutation of its fields."""
    head = footer[:52]
    return head + _U32.pack(crc32(head)) + footer[56:]


@_once
def _stored_blocks(samples) -> list[bytes]:
    out = []
    for table in (samples.lsm_plain, samples.lsm_zstd):
        footer = Footer.decode(table[-FOOTER_SIZE:], "s", len(table))
        for off, size in (footer.index, footer.properties, footer.filter):
            out.append(table[off: off + size + TRAILER_SIZE])
    reader_path = os.path.join(samples.root, "zstd-table.sst")
    with open(reader_path, "wb") as f:
        f.write(samples.lsm_zstd)
    reader = TableReader(DEFAULT_FS, reader_path, 1, cache=None)
    try:
        for off, size in list(zip(reader.index_offsets, reader.index_sizes))[:4]:
            out.append(samples.lsm_zstd[off: off + size + TRAILER_SIZE])
    finally:
        reader.close()
    return out


def _restore(stored: bytes) -> bytes:
    """A stored block whose trailer crc is recomputed (the payload reaches the decoder)."""
    if len(stored) < TRAILER_SIZE:
        return stored
    data = bytearray(stored)
    _fix_crc_at(data, 0, len(data) - TRAILER_SIZE)
    return bytes(data)


@FUZZ
@given(st.data())
def test_table_stored_block_decode(fuzz_counter, samples, data):
    bases = _stored_blocks(samples)
    raw = data.draw(st.one_of(inputs(bases), st.sampled_from(bases).flatmap(mutations).map(_restore)))

    def decode(d):
        decode_block(decode_stored_block(d, "fuzz.sst", 0), "fuzz.sst", 0)

    run_case(fuzz_counter, "lsmkv table stored block (trailer, zstd, block)", decode, raw, per_byte=PER_BYTE_ZSTD)


@_once
def _raw_blocks(samples) -> list[bytes]:
    path = os.path.join(samples.root, "plain-raw.sst")
    with open(path, "wb") as f:
        f.write(samples.lsm_plain)
    reader = TableReader(DEFAULT_FS, path, 1, cache=None)
    try:
        return reader.raw_blocks(0, min(4, reader.num_blocks))
    finally:
        reader.close()


@FUZZ
@given(st.data())
def test_table_block_decode(fuzz_counter, samples, data):
    raw = data.draw(inputs(_raw_blocks(samples), 300))

    def decode(d):
        block = decode_block(d, "fuzz.sst", 0)
        block.values()

    run_case(fuzz_counter, "lsmkv table data/index block", decode, raw)


@FUZZ
@given(st.data())
def test_table_block_decode_format_1(fuzz_counter, samples, data):
    """Blocks of format-1 tables (length columns), still read."""
    def as_format_1(raw: bytes) -> bytes:
        block = decode_block(raw)
        n = len(block)
        base = len(raw) - 4 - 16 * n
        lengths = [len(k) for k in block.keys] + [len(v) for v in block.values()]
        return raw[:base] + b"".join(x.to_bytes(4, "little") for x in lengths) + raw[base + 8 * n:]

    raw = data.draw(inputs([as_format_1(r) for r in _raw_blocks(samples)], 300))

    def decode(d):
        block = decode_block(d, "fuzz.sst", 0, CODEC_LENGTHS)
        block.values()

    run_case(fuzz_counter, "lsmkv table data/index block (format 1)", decode, raw)


@FUZZ
@given(st.data())
def test_table_block_search_in_place(fuzz_counter, samples, data):
    """A block searched in its raw bytes: check_block first (as every read
    from a file does), then lookups of keys in it, around it and absent."""
    bases = _raw_blocks(samples)
    raw = data.draw(inputs(bases, 300))
    probes = data.draw(st.lists(st.binary(max_size=24), max_size=4))

    def search(d):
        check_block(d, "fuzz.sst", 0)
        block = decode_block(d, "fuzz.sst", 0)  # what a block that passes check_block decodes to
        keys = block.keys
        for key in [*keys[:2], *keys[-2:], *probes]:
            for read_seq in (0, 1 << 56):
                # The answer a decoded search gives.
                j = bisect.bisect_left(keys, key)
                expect = CONTINUE
                while j < len(keys):
                    if keys[j] != key:
                        expect = None
                        break
                    if block.seq_kinds[j] >> 8 <= read_seq:
                        expect = (block.seq_kinds[j] & 0xFF, block.value(j))
                        break
                    j += 1
                got = search_block(d, key, read_seq)
                if keys == sorted(keys):
                    assert got == expect
                else:
                    # Keys out of order (a fuzzed block: a stored block's checksum
                    # would refuse it): a search may find another of the key's
                    # entries than the bisect does, but never a value the block
                    # does not hold for this key.
                    assert got == expect or got is None or got is CONTINUE or got in [
                        (block.seq_kinds[k] & 0xFF, block.value(k)) for k in range(len(keys))
                        if keys[k] == key]
            # A range read in place (a cursor's): the entries the decoded block
            # holds from the same binary search on, up to a limit.
            kinds = [sk & 0xFF for sk in block.seq_kinds]
            widths = fixed_widths(d)  # (a block of fixed-size records is also split at its widths)
            for inclusive in (True, False):
                j = (bisect.bisect_left if inclusive else bisect.bisect_right)(keys, key)
                got = entries_after(d, key, inclusive, 3)
                end = min(len(keys), j + 3)
                assert (got[0], list(got[1]), got[2]) == (
                    keys[j:end], kinds[j:end], [block.value(k) for k in range(j, end)])
                if widths is not None:
                    assert entries_after(d, key, inclusive, 3, widths) == got

    run_case(fuzz_counter, "lsmkv table block searched in place", search, raw)


@FUZZ
@given(st.data())
def test_table_columns_decode(fuzz_counter, samples, data):
    bases = _raw_blocks(samples)
    raws = data.draw(st.lists(inputs(bases, 300), min_size=1, max_size=3))

    def decode(_):
        cols = Columns.from_blocks(raws, "fuzz.sst", [0] * len(raws))
        cols.keys()

    run_case(fuzz_counter, "lsmkv compaction columns (blocks)", decode, b"".join(raws))


@_once
def _properties_and_filter(samples) -> tuple[bytes, bytes]:
    footer = Footer.decode(samples.lsm_plain[-FOOTER_SIZE:], "s", len(samples.lsm_plain))
    p_off, p_size = footer.properties
    f_off, f_size = footer.filter
    return samples.lsm_plain[p_off:p_off + p_size], samples.lsm_plain[f_off:f_off + f_size]


#: Range-tombstone blocks: overlapping, nested and adjacent ranges, fragmented.
_RANGE_DEL_BLOCKS = [
    encode_range_dels(FragmentedTombstones.build([(b"c", b"g", 5), (b"a", b"e", 3), (b"d", b"f", 9)])),
    encode_range_dels(FragmentedTombstones.build([(b"k%03d" % i, b"k%03d" % (i + 7), i + 1) for i in range(0, 60, 5)])),
    encode_range_dels(FragmentedTombstones.build([(b"", b"\xff" * 8, 1 << 40)])),
]


@FUZZ
@given(st.data())
def test_table_range_del_block_decode(fuzz_counter, samples, data):
    raw = data.draw(inputs(_RANGE_DEL_BLOCKS))
    run_case(fuzz_counter, "lsmkv table range-tombstone block", lambda d: decode_range_dels(d, "fuzz.sst", 0), raw)


@FUZZ
@given(st.data())
def test_table_properties_decode(fuzz_counter, samples, data):
    props, _ = _properties_and_filter(samples)
    raw = data.draw(inputs([props]))
    run_case(fuzz_counter, "lsmkv table properties", lambda d: TableProperties.decode(d, "fuzz.sst", 0), raw)


@FUZZ
@given(st.data())
def test_table_bloom_decode(fuzz_counter, samples, data):
    _, bloom = _properties_and_filter(samples)
    raw = data.draw(inputs([bloom]))

    def decode(d):
        f = BloomFilter(d, "fuzz.sst", 0)
        f.may_contain(12345)
        f.may_contain(2**64 - 1)

    run_case(fuzz_counter, "lsmkv table bloom filter", decode, raw)


def _read_whole_table(path: str) -> None:
    reader = TableReader(DEFAULT_FS, path, 1, cache=None)
    try:
        for _ in reader.entries():
            pass
        list(visible_entries(table_source(reader, 1 << 56)))
        list(visible_entries(table_source(reader, 1 << 56), reverse=True))
        for key in (b"key00003", b"key00150", b"zzz", b""):
            reader.get(key, None, 1 << 56)
        Columns.from_blocks(reader.raw_blocks(0, reader.num_blocks), path,
                            reader.index_offsets, reader.codec).keys()
    finally:
        reader.close()
    # Lookups through a cache: blocks held raw, then decoded once they keep being used.
    reader = TableReader(DEFAULT_FS, path, 1, cache=BlockCache(1 << 20))
    try:
        for _ in range(PROMOTE_AFTER + 1):
            for key in (b"key00003", b"key00150", b"zzz"):
                reader.get(key, None, 1 << 56)
    finally:
        reader.close()
    problems, _ = verify_table(DEFAULT_FS, path, 1)
    del problems


@st.composite
def _table_file(draw, samples):
    """A whole table file: mutated, or (uncompressed table) with one block's
    payload mutated and its checksum recomputed."""
    if draw(st.booleans()):
        return draw(mutations(draw(st.sampled_from([samples.lsm_plain, samples.lsm_zstd]))))
    blocks = samples.lsm_blocks()
    off, size = draw(st.sampled_from(blocks))
    data = bytearray(draw(mutations(samples.lsm_plain, keep_size=True, region=(off, off + max(size, 1)))))
    _fix_crc_at(data, off, off + size)
    return bytes(data)


@FUZZ
@given(st.data())
def test_table_reader_whole_file(fuzz_counter, samples, workdir, data):
    raw = data.draw(_table_file(samples))
    path = os.path.join(workdir, "000001.sst")

    def decode(d):
        with open(path, "wb") as f:
            f.write(d)
        _read_whole_table(path)

    run_case(fuzz_counter, "lsmkv TableReader (whole file)", decode, raw, allowed=VERSIONED, per_byte=PER_BYTE_ZSTD)


# ---------------------------------------------------------------------------
# lsmkv: manifest
# ---------------------------------------------------------------------------


@_once
def _edit_payloads(samples) -> list[bytes]:
    return [payload for _, payload in LogReader(samples.manifest, "m").records()]


@FUZZ
@given(st.data())
def test_manifest_edit_decode(fuzz_counter, samples, data):
    raw = data.draw(inputs(_edit_payloads(samples)))
    run_case(fuzz_counter, "lsmkv manifest VersionEdit", lambda d: VersionEdit.decode(d, "MANIFEST", 0), raw,
             allowed=VERSIONED)


def _framed(workdir: str, payloads: list[bytes]) -> bytes:
    """``payloads`` as records of a log file (valid framing and checksums)."""
    path = os.path.join(workdir, "framed.log")
    writer = LogWriter(DEFAULT_FS.create(path))
    for p in payloads:
        writer.add_record(p)
    writer.close()
    with open(path, "rb") as f:
        return f.read()


def _replay_manifest(workdir: str, current: bytes, manifest: bytes) -> None:
    db = os.path.join(workdir, "manifest-db")
    os.makedirs(db, exist_ok=True)
    for name in os.listdir(db):
        os.remove(os.path.join(db, name))
    with open(os.path.join(db, CURRENT), "wb") as f:
        f.write(current)
    with open(os.path.join(db, "MANIFEST-000005"), "wb") as f:
        f.write(manifest)
    VersionSet(db, DEFAULT_FS).recover()


@FUZZ
@given(st.data())
def test_manifest_replay(fuzz_counter, samples, workdir, data):
    edits = _edit_payloads(samples)
    if data.draw(st.booleans()):
        manifest = data.draw(mutations(samples.manifest))
    else:  # intact framing around mutated edits: replay sees every decoded edit
        manifest = _framed(workdir, data.draw(st.lists(st.sampled_from(edits).flatmap(mutations), min_size=1,
                                                       max_size=3)))
    run_case(fuzz_counter, "lsmkv manifest replay",
             lambda d: _replay_manifest(workdir, b"MANIFEST-000005\n", d), manifest, allowed=VERSIONED)


@FUZZ
@given(st.data())
def test_current_file_parsing(fuzz_counter, samples, workdir, data):
    current = data.draw(st.one_of(st.binary(max_size=64), mutations(b"MANIFEST-000005\n")))
    run_case(fuzz_counter, "lsmkv CURRENT",
             lambda d: _replay_manifest(workdir, d, samples.manifest), current, allowed=VERSIONED)


@FUZZ
@given(st.data())
def test_check_db_on_a_fuzzed_table(fuzz_counter, samples, workdir, data):
    """`lsmkv check` reports any change to a table as a problem, never raises."""
    raw = data.draw(mutations(data.draw(st.sampled_from([samples.lsm_zstd]))))
    db = os.path.join(workdir, "check-db")
    if not os.path.exists(db):
        shutil.copytree(samples.lsm_dir, db)
    table = [n for n in os.listdir(db) if n.endswith(".sst")][0]

    def decode(d):
        with open(os.path.join(db, table), "wb") as f:
            f.write(d)
        report = check_db(db)
        assert report.ok == (d == samples.lsm_zstd), report.problems

    run_case(fuzz_counter, "lsmkv check (whole database)", decode, raw, allowed=(), per_byte=PER_BYTE_ZSTD)


# ---------------------------------------------------------------------------
# btree: pages, meta, journal, log
# ---------------------------------------------------------------------------


def _reseal(img: bytes) -> bytes:
    """A page image with its checksum recomputed (the decoder sees the body)."""
    data = bytearray(img)
    _U32.pack_into(data, 0, crc32(bytes(data[4:])))
    return bytes(data)


@st.composite
def _page(draw, samples, page_type: int):
    pages = samples.btree_page_images()[page_type]
    pgno, img = draw(st.sampled_from(pages))
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return pgno, draw(mutations(img))
    if choice == 1:
        return pgno, _reseal(draw(mutations(img, keep_size=True)))
    return pgno, _reseal(_U32.pack(0) + draw(st.binary(min_size=508, max_size=508)))


def _decode_page(page_type: int):
    def decode(pgno: int, d: bytes) -> None:
        if page_type == PAGE_LEAF:
            # A range read's view of a leaf outside the pool (every cell,
            # as a scan reads them), then the pool's full decode.
            image = read_leaf_image(d, pgno, 512, "btree.pages")
            image.cells(0, image.count)
            decode_node(d, pgno, 512, "btree.pages")
        elif page_type == PAGE_INTERNAL:
            decode_node(d, pgno, 512, "btree.pages")
        elif page_type == PAGE_OVERFLOW:
            decode_overflow(d, pgno, 512, "btree.pages")
        elif page_type == PAGE_FREELIST:
            decode_freelist(d, pgno, 512, "btree.pages")
        elif page_type in (PAGE_MAP, PAGE_MAPDIR):
            decode_numbers(d, pgno, page_type, 512, "btree.pages")
        else:
            decode_meta(d, pgno, 512, "btree.pages")
    return decode


@pytest.mark.parametrize("page_type", [PAGE_LEAF, PAGE_INTERNAL, PAGE_OVERFLOW, PAGE_FREELIST, PAGE_MAP, PAGE_MAPDIR,
                                       PAGE_META],
                         ids=["leaf", "internal", "overflow", "free-list", "page-map", "map-directory", "meta"])
@FUZZ
@given(data=st.data())
def test_btree_page_decode(fuzz_counter, samples, page_type, data):
    pgno, raw = data.draw(_page(samples, page_type))
    decode = _decode_page(page_type)
    name = PAGE_TYPE_NAMES[page_type]
    run_case(fuzz_counter, f"btree {name} page", lambda d: decode(pgno, d), raw,
             allowed=VERSIONED if page_type == PAGE_META else (CorruptionError,))


@functools.lru_cache(maxsize=4)
def _btree_records(log: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record in a btree log."""
    out = []
    pos = LOG_HEADER_SIZE
    while pos + FRAME.size <= len(log):
        _, length = FRAME.unpack_from(log, pos)
        out.append((pos, pos + FRAME.size + length))
        pos += FRAME.size + length
    return out


@st.composite
def _btree_log(draw, samples):
    log = samples.bt_log
    if draw(st.booleans()):
        return draw(mutations(log))
    start, end = draw(st.sampled_from(_btree_records(log)))
    data = bytearray(draw(mutations(log, keep_size=True, region=(start + FRAME.size, end))))
    FRAME.pack_into(data, start, crc32(bytes(data[start + FRAME.size:end])), end - start - FRAME.size)
    return bytes(data)


@FUZZ
@given(st.data())
def test_btree_log_parse(fuzz_counter, samples, data):
    raw = data.draw(_btree_log(samples))
    run_case(fuzz_counter, "btree wal parse_log", lambda d: parse_log(d, "btree.log"), raw)


@FUZZ
@given(st.data())
def test_btree_log_batch_decode(fuzz_counter, samples, data):
    payloads = [samples.bt_log[s + FRAME.size:e] for s, e in _btree_records(samples.bt_log)]
    raw = data.draw(inputs(payloads))
    run_case(fuzz_counter, "btree wal batch decode", lambda d: btree_decode_batch(d, "btree.log", 0), raw)


@st.composite
def _journal(draw, samples):
    images = samples.btree_page_images()
    chosen = [img for _, img in draw(st.lists(st.sampled_from(images[PAGE_LEAF] + images[PAGE_INTERNAL]),
                                              min_size=1, max_size=3))]
    chosen.append(images[PAGE_META][0][1])
    journal = encode_journal(512, 9, chosen)
    mode = draw(st.integers(0, 2))
    if mode == 0:
        return draw(mutations(journal))
    # Mutate the images, keep every checksum valid: the page checks decide.
    body = bytearray(draw(mutations(journal, keep_size=True, region=(32, len(journal) - 4))))
    if mode == 2:
        for k in range(len(chosen)):
            page = bytes(body[32 + k * 512: 32 + (k + 1) * 512])
            body[32 + k * 512: 32 + (k + 1) * 512] = _reseal(page)
    return encode_journal(512, 9, [bytes(body[32 + k * 512: 32 + (k + 1) * 512]) for k in range(len(chosen))])


@FUZZ
@given(st.data())
def test_btree_journal_decode(fuzz_counter, samples, data):
    raw = data.draw(st.one_of(st.binary(max_size=2000), _journal(samples)))
    run_case(fuzz_counter, "btree journal", lambda d: decode_journal(d, 512, "btree.journal"), raw)


@st.composite
def _page_file(draw, samples):
    """The sample's page file with some pages mutated (checksums recomputed
    or not), or truncated."""
    pages = bytearray(samples.bt_pages)
    n = len(pages) // 512
    for _ in range(draw(st.integers(1, 3))):
        pg = draw(st.integers(0, n - 1))
        img = draw(mutations(bytes(pages[pg * 512:(pg + 1) * 512]), keep_size=True))
        if draw(st.booleans()):
            img = _reseal(img)
        pages[pg * 512:(pg + 1) * 512] = img
    if draw(st.integers(0, 9)) == 0:
        del pages[draw(st.integers(0, len(pages))):]
    return bytes(pages)


def _open_fuzzed_btree(workdir: str, samples, pages: bytes) -> None:
    db = os.path.join(workdir, "bt-db")
    shutil.rmtree(db, ignore_errors=True)
    os.makedirs(db)
    with open(os.path.join(db, PAGES_FILE), "wb") as f:
        f.write(pages)
    with open(os.path.join(db, LOG_FILE), "wb") as f:
        f.write(samples.bt_log)
    report = btree.check(db)
    assert isinstance(report.ok, bool)
    with btree.open(db, read_only=True) as ro:
        for _ in ro.scan():
            pass
        ro.get(b"key00100")
        ro.get(b"big")


@FUZZ
@given(st.data())
def test_btree_whole_page_file(fuzz_counter, samples, workdir, data):
    raw = data.draw(_page_file(samples))
    run_case(fuzz_counter, "btree open + check (whole page file)",
             lambda d: _open_fuzzed_btree(workdir, samples, d), raw, allowed=VERSIONED)
