"""The log format: the write-ahead log and the manifest are both written in it.

A log is a sequence of 32 KiB blocks. A record (one write batch, or one
manifest edit) is stored as one or more fragments; each fragment has a 7-byte
header ``crc32 (u32) | length (u16) | type (u8)`` followed by ``length`` bytes.
The crc covers the type byte and the fragment's bytes. A record that fits in
the rest of its block is one FULL fragment; otherwise FIRST, MIDDLE..., LAST.
When fewer than 7 bytes remain in a block they are zero-filled and the next
fragment starts at the next block. (LevelDB's log format, with zlib's crc32.)

Reading tells apart three kinds of damage:

* a *torn tail*: what a crash leaves behind while a record was being
  appended, which was never acknowledged as synced and is dropped quietly
  (and counted): the file ends inside a header, a fragment or a fragmented
  record, or a damaged fragment is followed by nothing but zero bytes that
  begin inside it (its bytes were cut short, or a preallocated log's
  unwritten space shows through) -- unless flipping a single bit of it
  would make it intact, which a cut-short write never does and a flipped
  bit always does: that is corruption.
* a *zeroed region*: a header of zeros. Never written by the writer; it is
  where a preallocated log's unwritten space begins, or left by a power
  loss that kept the file's length but not its unsynced pages. Everything
  from there on was unsynced, so reading stops. Any header whose type
  byte is zero reads the same way: the writer writes an append's first type
  byte last, because a copy into a mapped log is not ordered and a process
  killed during it can leave any of the append's other bytes written
  (measured: a zero header followed by its batch's bytes, after a SIGKILL in
  the crash test). The price: a bit flip that turns a synced record's type
  byte into zero reads as the log's end rather than as corruption (LevelDB
  treats its zero type the same way); every other flip is still caught.
* *corruption*: any other damage. Strict reading raises CorruptionError
  naming the file and offset; salvage reading skips to the next intact
  record (right after the damaged fragment when its length field still leads
  to one in the same block, else at a later block boundary; or drops the
  rest) and records what it dropped.

A log another process is still appending to (read by a read-only handle
that follows the writer, catch_up.py) is read with ``in_progress=True``:
the reader sees a prefix of what the writer appends, so damage after which
no intact record follows is the end of what the writer has written so far
(an append under way, or seen half-copied), and reading stops there quietly;
damage followed by an intact record is judged as above. Reading can start
at a record boundary part-way through the file (``origin``, ``start``): a
follower reads only what was appended since it last read.

This module must never interpret record payloads; see write_batch.py and
version.py for those.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator

from lsmkv.base.checksum import crc32, single_bit_error, start_before
from lsmkv.base.errors import CorruptionError
from lsmkv.base.fs import WritableFile

try:
    import cython
except ImportError:  # pragma: no cover - the pure build without Cython installed
    from lsmkv.base.compile_hints import cython

if not cython.compiled:  # (compiled, put_le is a C function cimported in the .pxd)
    from lsmkv.base.little_endian import put_le

BLOCK_SIZE = 32 * 1024
HEADER = struct.Struct("<IHB")
HEADER_SIZE = HEADER.size  # 7

ZERO, FULL, FIRST, MIDDLE, LAST = 0, 1, 2, 3, 4
_TYPE_SEED = [crc32(bytes([t])) for t in range(5)]
_FULL_SEED = _TYPE_SEED[FULL]
#: The start from which a FULL record's payload sums to its checksum with
#: HEADER_SIZE zero bytes in front of it (LogWriter.add_framed).
_FRAMED_SEED = start_before(bytes(HEADER_SIZE), _FULL_SEED)
_PAD = bytes(HEADER_SIZE)
_pack_header = HEADER.pack
#: A fragment ending at or before this offset in its block leaves room for another header.
_LAST_HEADER_START = BLOCK_SIZE - HEADER_SIZE
#: Where in an append its first header's type byte sits: an append always
#: starts with a header (a block's tail too short for one is padded at the
#: end of the append before), and that byte is written last (lsmkv/base/fs.py
#: MappedAppendFile.append), so an append a crash cut short reads as
#: unwritten space from its first header on.
_COMMIT_AT = HEADER_SIZE - 1


class LogWriter:
    """Appends records to a log file. Not thread-safe: the DB serializes
    writers (one log writer at a time); ``sync`` may run on another thread
    meanwhile (the file allows it)."""

    __slots__ = ("file", "_block_offset")

    def __init__(self, file: WritableFile) -> None:
        self.file = file
        self._block_offset = file.size % BLOCK_SIZE

    def add_record(self, payload: bytes) -> int:
        """Append one record; returns the bytes appended (headers included).

        The whole record goes to the OS in one append.
        """
        n = len(payload)
        header = HEADER_SIZE  # (C integers in the compiled build: typed locals, see wal.pxd)
        last_header_start = _LAST_HEADER_START
        end = self._block_offset + header + n
        if end <= last_header_start:
            # The common case: one FULL fragment, with room left in the block
            # for the next header.
            self._block_offset = end
            self.file.append(_pack_header(crc32(payload, _FULL_SEED), n, FULL) + payload, _COMMIT_AT)
            return header + n
        return self._add_fragmented(payload)

    def add_framed(self, record: bytearray) -> int:
        """add_record of ``record[HEADER_SIZE:]``, where ``record``'s first
        HEADER_SIZE bytes are zero, free for the header (write_batch.py
        encode_single_framed): the payload is summed with them in front
        (from _FRAMED_SEED), the header written in place and the record
        appended as it is, with no copy of the payload. Returns the bytes
        appended."""
        header = HEADER_SIZE  # (C integers in the compiled build: typed locals, see wal.pxd)
        last_header_start = _LAST_HEADER_START
        n = len(record) - header
        end = self._block_offset + len(record)
        if end > last_header_start:
            return self.add_record(bytes(record[header:]))
        crc = crc32(record, _FRAMED_SEED)  # (the payload's sum: the header's bytes are still zero)
        p = record
        put_le(p, 0, crc, 4)
        put_le(p, 4, n, 2)
        put_le(p, 6, FULL, 1)
        self._block_offset = end
        self.file.append(record, _COMMIT_AT)
        return len(record)

    def add_records(self, payloads: list[bytes]) -> int:
        """Append several records (a group commit's batches) in one append;
        returns the bytes appended. Each stays a record of its own, so a
        crash in the middle of the append keeps the whole records before
        the cut and drops the rest as a torn tail."""
        if len(payloads) == 1:
            return self.add_record(payloads[0])
        parts: list[bytes] = []
        for payload in payloads:
            n = len(payload)
            end = self._block_offset + HEADER_SIZE + n
            if end <= _LAST_HEADER_START:
                self._block_offset = end
                parts.append(_pack_header(crc32(payload, _FULL_SEED), n, FULL))
                parts.append(payload)
            else:
                self._fragment(payload, parts)
        data = b"".join(parts)
        self.file.append(data, _COMMIT_AT)
        return len(data)

    def _add_fragmented(self, payload: bytes) -> int:
        parts: list[bytes] = []
        self._fragment(payload, parts)
        data = b"".join(parts)
        self.file.append(data, _COMMIT_AT)
        return len(data)

    def _fragment(self, payload: bytes, parts: list[bytes]) -> None:
        """Add ``payload``'s fragments (and any block padding) to ``parts``
        and move the block offset past them."""
        view = memoryview(payload)
        pos = 0
        n = len(payload)
        first = True
        offset = self._block_offset
        while True:
            left = BLOCK_SIZE - offset
            if left < HEADER_SIZE:
                parts.append(_PAD[:left])
                offset = 0
                left = BLOCK_SIZE
            avail = left - HEADER_SIZE
            chunk = view[pos: pos + avail]
            end = pos + len(chunk) == n
            if first and end:
                kind = FULL
            elif first:
                kind = FIRST
            elif end:
                kind = LAST
            else:
                kind = MIDDLE
            parts.append(HEADER.pack(crc32(chunk, _TYPE_SEED[kind]), len(chunk), kind))
            parts.append(bytes(chunk))
            offset += HEADER_SIZE + len(chunk)
            pos += len(chunk)
            first = False
            if end:
                break
        if BLOCK_SIZE - offset < HEADER_SIZE:
            parts.append(_PAD[: BLOCK_SIZE - offset])
            offset = 0
        self._block_offset = offset % BLOCK_SIZE

    def sync(self) -> None:
        self.file.sync()

    def close(self) -> None:
        self.file.close()

    def abandon(self) -> None:
        """Release the file without further I/O (an obsolete log, or a crash)."""
        self.file.abandon()


@dataclass
class LogReadReport:
    """What reading a log found besides its records."""

    path: str
    records: int = 0
    #: Bytes at the tail dropped as torn (never acknowledged as synced).
    torn_tail_bytes: int = 0
    #: (offset, bytes, reason) of each damaged region skipped in salvage mode.
    dropped: list[tuple[int, int, str]] = field(default_factory=list)
    #: ``in_progress`` reading: bytes from where reading stopped at damage
    #: that nothing intact follows (an append the writer has not finished)
    #: to the end of what was read.
    unfinished_bytes: int = 0


class LogReader:
    """Reads the records of a whole log held in memory.

    ``salvage=False`` (strict) raises CorruptionError for damage that is not a
    torn tail; ``salvage=True`` skips it and lists it in ``report.dropped``.

    ``data`` holds the file from offset ``origin`` (a multiple of
    BLOCK_SIZE) on; reading starts at file offset ``start`` (a record
    boundary, by default ``origin``). Offsets reported are file offsets.
    ``in_progress``: the file may still be being appended to (see the
    module docstring). After reading, ``end`` is the file offset to go on
    from: past the last whole record, or where a torn or unfinished record
    begins.
    """

    def __init__(self, data: bytes, path: str, *, salvage: bool = False, origin: int = 0,
                 start: int | None = None, in_progress: bool = False) -> None:
        if origin % BLOCK_SIZE:
            raise ValueError(f"origin {origin} is not a multiple of the block size")
        if start is not None and not origin <= start <= origin + len(data):
            raise ValueError(f"start {start} lies outside the data read from {origin}")
        self._data = data
        self.path = path
        self.salvage = salvage
        self.origin = origin
        self._start = 0 if start is None else start - origin
        self.in_progress = in_progress
        self.report = LogReadReport(path)
        #: File offset where the next read goes on (see the class docstring).
        self.end = origin + self._start

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self.records()

    def records(self) -> Iterator[tuple[int, bytes]]:
        """Yield (file offset of the record's first fragment, payload)."""
        data = self._data
        origin = self.origin
        size = len(data)
        pos = self._start
        pending: list[bytes] = []
        pending_start = -1
        while pos < size:
            if not pending:
                self.end = origin + pos
            block_left = BLOCK_SIZE - pos % BLOCK_SIZE
            if block_left < HEADER_SIZE:
                pos += block_left  # trailer padding
                continue
            if pos + HEADER_SIZE > size:
                self._torn(pending_start if pending else pos, size)
                return
            crc, length, kind = HEADER.unpack_from(data, pos)
            if kind == ZERO:
                # A zeroed region, or an append a crash cut short (its first
                # header's type byte is written last): nothing from here on
                # was acknowledged as synced.
                self._torn(pending_start if pending else pos, size)
                return
            end = pos + HEADER_SIZE + length
            problem = None
            if kind < FULL or kind > LAST:
                problem = f"unknown fragment type {kind}"
            elif HEADER_SIZE + length > block_left:
                problem = f"fragment length {length} runs past its block"
            elif end > size:
                problem = "fragment runs past the end of the file"
            elif crc32(data[pos + HEADER_SIZE: end], _TYPE_SEED[kind]) != crc:
                problem = "checksum mismatch"
            if problem is not None:
                start = pending_start if pending else pos
                # If only the fragment's bytes were damaged, its length still
                # says where the next fragment of the block starts.
                after = end if HEADER_SIZE + length <= block_left and end <= size else None
                if self.in_progress:
                    resume = self._next_valid_record(pos, after)
                    if resume is None:
                        # Nothing intact after it: the writer's append is
                        # not finished (or was read half-copied).
                        self.end = origin + start
                        self.report.unfinished_bytes += size - start
                        return
                elif (end > size or self._zeros_from() < end) and not self._one_bit_off(pos):
                    self._torn(start, size)  # cut short by a crash: never acknowledged as synced
                    return
                if not self.salvage:
                    raise CorruptionError(f"log record damaged: {problem}", path=self.path, offset=origin + pos)
                if not self.in_progress:
                    resume = self._next_valid_record(pos, after)
                self.report.dropped.append((origin + start, (size if resume is None else resume) - start, problem))
                if resume is None:
                    self.end = origin + size
                    return
                pending = []
                pos = resume
                continue
            fragment = data[pos + HEADER_SIZE: end]
            if kind == FULL:
                if pending:
                    self._orphan(pending_start, pos, "record interrupted by a new record")
                    pending = []
                self.report.records += 1
                yield origin + pos, fragment
            elif kind == FIRST:
                if pending:
                    self._orphan(pending_start, pos, "record interrupted by a new record")
                pending = [fragment]
                pending_start = pos
            else:
                if not pending:
                    self._orphan(pos, end, "fragment without a first fragment")
                else:
                    pending.append(fragment)
                    if kind == LAST:
                        self.report.records += 1
                        yield origin + pending_start, b"".join(pending)
                        pending = []
            pos = end
        if pending:
            self._torn(pending_start, size)
        else:
            self.end = origin + pos

    def _zeros_from(self) -> int:
        """Where the run of zero bytes that ends the data begins (computed
        only when damage is judged: a preallocated log's unwritten space
        takes milliseconds to scan)."""
        return len(self._data.rstrip(b"\0"))

    def _one_bit_off(self, pos: int) -> bool:
        """Whether flipping one bit of the fragment at ``pos`` (its checksum,
        length, type or data) would make it intact: damage in place, never
        the work of a write cut short."""
        data = self._data
        size = len(data)
        crc, length, kind = HEADER.unpack_from(data, pos)
        start = pos + HEADER_SIZE
        if FULL <= kind <= LAST and start + length <= size:
            if single_bit_error(data[start: start + length], crc, _TYPE_SEED[kind]) is not None:
                return True
        for bit in range(8):
            other = kind ^ (1 << bit)
            if FULL <= other <= LAST and start + length <= size \
                    and crc32(data[start: start + length], _TYPE_SEED[other]) == crc:
                return True
        if FULL <= kind <= LAST:
            for bit in range(16):
                other = length ^ (1 << bit)
                if start + other <= size and crc32(data[start: start + other], _TYPE_SEED[kind]) == crc:
                    return True
        return False

    def _torn(self, start: int, size: int) -> None:
        """Reading ends at ``start`` (a position in the data): a torn tail
        after a crash, or, for a log being written, where the writer has
        not written yet (not counted as torn: nothing was lost)."""
        self.end = self.origin + start
        if not self.in_progress:
            self.report.torn_tail_bytes += size - start

    def _orphan(self, start: int, end: int, reason: str) -> None:
        if not self.salvage:
            raise CorruptionError(f"log damaged: {reason}", path=self.path, offset=self.origin + start)
        self.report.dropped.append((self.origin + start, end - start, reason))

    def _next_valid_record(self, pos: int, after: int | None = None) -> int | None:
        """Offset of the first intact FULL/FIRST fragment after the damaged
        fragment at ``pos``: among the fragments from ``after`` (where the
        damaged fragment's length says the next one starts) to the end of
        its block, else at a later block boundary."""
        block = (pos // BLOCK_SIZE + 1) * BLOCK_SIZE
        if after is not None and after < block:
            found = self._record_start_in_block(after, block)
            if found is not None:
                return found
        size = len(self._data)
        while block + HEADER_SIZE <= size:
            found = self._record_start_in_block(block, block + BLOCK_SIZE)
            if found is not None:
                return found
            block += BLOCK_SIZE
        return None

    def _record_start_in_block(self, p: int, block_end: int) -> int | None:
        """Follow intact fragments from ``p`` up to ``block_end``; the offset
        of the first FULL/FIRST one, None if an invalid one comes first."""
        data = self._data
        limit = min(len(data), block_end)
        while p + HEADER_SIZE <= limit:
            crc, length, kind = HEADER.unpack_from(data, p)
            end = p + HEADER_SIZE + length
            if kind < FULL or kind > LAST or end > limit:
                return None
            if crc32(data[p + HEADER_SIZE: end], _TYPE_SEED[kind]) != crc:
                return None
            if kind in (FULL, FIRST):
                return p
            p = end
        return None
