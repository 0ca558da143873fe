"""Table file layout: block trailers, compression, block handles and the footer.

A table file is::

    data block 0 | ... | data block n-1 | filter block | properties block | index block | footer

Every block is stored as ``payload | type (u8) | crc32 (u32)``: ``type`` 0 means
the payload is the raw block, 1 that it is a zstandard frame of it; the crc
covers payload and type byte. A *handle* (offset u64, size u64) locates a
block's payload (trailer excluded).

The footer is the last 64 bytes::

    index handle (16) | filter handle (16) | properties handle (16) |
    format version (u32) | crc32 of the previous 52 bytes (u32) | magic (u64)
"""

from __future__ import annotations

import struct
import threading

import zstandard

from lsmkv.base.checksum import crc32
from lsmkv.base.errors import CorruptionError

TABLE_MAGIC = 0x4C534D4B56544231  # "LSMKVTB1"
#: Format 2: blocks store end offsets (block.py), so a lookup searches a
#: block in its raw bytes. Format 1 (length columns) is still read.
#: Format 3: format 2 whose entries may be of kind 2 (a value with a ttl:
#: its deadline in front of it) or kind 4 (a merge operand). Written only
#: by a table that holds such an entry; one without any is written as
#: format 2, byte for byte.
#: Format 4: format 3 with a range-tombstone block (range_del_block.py),
#: located by the properties range_del_offset and range_del_size. Written
#: only by a table that holds range tombstones.
FORMAT_VERSION = 4
#: The version of a table with kind-2 or kind-4 entries and no range tombstones.
FORMAT_VERSION_WITH_TTL = 3
#: The version of a table without kind-2 entries.
FORMAT_VERSION_WITHOUT_TTL = 2
OLDEST_FORMAT_VERSION = 1

NO_COMPRESSION = 0
ZSTD_COMPRESSION = 1

TRAILER = struct.Struct("<BI")
TRAILER_SIZE = TRAILER.size  # 5
FOOTER = struct.Struct("<QQQQQQII Q")
FOOTER_SIZE = FOOTER.size  # 64
_FOOTER_CRC_SPAN = 52

_TYPE_SEED = [crc32(b"\x00"), crc32(b"\x01")]
#: Largest uncompressed block a reader accepts (bounds memory on corrupt
#: input): a block is cut once it reaches block_size (options.MAX_BLOCK_SIZE
#: at most), so it holds at most that plus one entry (a key and a value at
#: their limits). Index blocks of tables up to several GiB stay below it too.
_MAX_BLOCK = 2 * 64 * 1024 * 1024 + 64 * 1024 + 64
#: A zstandard frame needs at least 4 bytes (a block header and a byte) for
#: each 128 KiB it expands to, so a frame claiming more is damaged.
_ZSTD_BYTES_PER_4 = 128 * 1024

_local = threading.local()


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "zstd_d", None)
    if d is None:
        d = _local.zstd_d = zstandard.ZstdDecompressor()
    return d


def compress_block(raw: bytes, compressor: zstandard.ZstdCompressor | None) -> bytes:
    """``payload | type | crc`` for ``raw``; compressed only when that saves
    at least 1/8 of the bytes (RocksDB's and LevelDB's rule). A block that
    compresses less is stored raw: reading it then costs no decompression,
    and a point lookup searches it where it lies (block.search_block). The
    offset and sequence columns of a block of incompressible values
    compress well but are only a tenth of it, so such blocks stay raw."""
    return stored_block(raw, None if compressor is None else compressor.compress(raw))


def stored_block(raw: bytes, packed: bytes | None) -> bytes:
    """``payload | type | crc`` for ``raw`` whose zstd frame is ``packed``
    (None: not compressed): the frame if it saves at least 1/8 of the bytes,
    else ``raw`` (:func:`compress_block`'s rule)."""
    if packed is not None and len(packed) <= len(raw) - (len(raw) >> 3):
        return packed + TRAILER.pack(ZSTD_COMPRESSION, crc32(packed, _TYPE_SEED[ZSTD_COMPRESSION]))
    return raw + TRAILER.pack(NO_COMPRESSION, crc32(raw, _TYPE_SEED[NO_COMPRESSION]))



def decode_stored_block(stored: bytes | memoryview, path: str, offset: int) -> bytes:
    """Verify a block's trailer and return its raw (uncompressed) bytes."""
    kind, payload, declared = _checked_payload(stored, path, offset)
    return bytes(payload) if kind == NO_COMPRESSION else _decompressed(payload, declared, path, offset)


def _decompressed(payload: bytes | memoryview, declared: int, path: str, offset: int) -> bytes:
    """The zstd frame ``payload`` (checked by _checked_payload) decompressed
    to the ``declared`` bytes it claims; CorruptionError otherwise."""
    try:
        raw = _decompressor().decompress(payload, max_output_size=declared)
    except zstandard.ZstdError as exc:
        raise CorruptionError(f"block does not decompress: {exc}", path=path, offset=offset) from None
    if len(raw) != declared:
        raise CorruptionError(f"block decompresses to {len(raw)} bytes, its frame says {declared}", path=path,
                              offset=offset)
    return raw


def decode_stored_blocks(stored: list, path: str, offsets: list[int]) -> list[bytes]:
    """:func:`decode_stored_block` of each of ``stored`` (the blocks at
    ``offsets``), every trailer checked first, then the compressed ones
    decompressed by one zstd call (``multi_decompress_to_buffer``). Each
    zstd call lets go of the GIL, and a thread taking it back waits up to a
    switch interval (5 ms) for a busy one: block by block, a compaction
    reading 600 blocks beside a busy user thread took 1.7 s to decompress
    them, in calls of 60 blocks 0.06 s. A batch that fails is decoded
    block by block, so the error names the block."""
    out: list = []
    frames = []
    sizes = []
    at = []
    for i, block in enumerate(stored):
        kind, payload, declared = _checked_payload(block, path, offsets[i])
        if kind == NO_COMPRESSION:
            out.append(bytes(payload))
        else:
            out.append(None)
            frames.append(payload)
            sizes.append(declared)
            at.append(i)
    if len(frames) > 1:
        try:
            decoded = _decompressor().multi_decompress_to_buffer(frames, struct.pack(f"<{len(sizes)}Q", *sizes))
            raws = [decoded[j].tobytes() for j in range(len(frames))]
        except zstandard.ZstdError:
            raws = None
        if raws is not None and list(map(len, raws)) == sizes:
            for i, raw in zip(at, raws):
                out[i] = raw
            return out
    for j, i in enumerate(at):  # (one frame, or a batch that failed: this raises for the bad one)
        out[i] = _decompressed(frames[j], sizes[j], path, offsets[i])
    return out


def _checked_payload(stored: bytes | memoryview, path: str, offset: int) -> tuple[int, bytes | memoryview, int]:
    """(compression kind, payload, size the zstd frame declares (-1 when
    not compressed)) of a stored block whose trailer (kind, checksum) and
    declared size pass; CorruptionError otherwise."""
    if len(stored) < TRAILER_SIZE:
        raise CorruptionError("block shorter than its trailer (truncated table)", path=path, offset=offset)
    n = len(stored) - TRAILER_SIZE
    kind, crc = TRAILER.unpack_from(stored, n)
    if kind > ZSTD_COMPRESSION:
        raise CorruptionError(f"block has unknown compression type {kind}", path=path, offset=offset)
    payload = stored[:n]
    if crc32(payload, _TYPE_SEED[kind]) != crc:
        raise CorruptionError("block checksum mismatch", path=path, offset=offset)
    if kind == NO_COMPRESSION:
        return kind, payload, -1
    try:
        # The size the frame claims is checked before anything is allocated for it.
        declared = zstandard.frame_content_size(payload)
    except zstandard.ZstdError as exc:
        raise CorruptionError(f"block does not decompress: {exc}", path=path, offset=offset) from None
    if declared < 0 or declared > min(_MAX_BLOCK, (len(payload) // 4 + 1) * _ZSTD_BYTES_PER_4):
        raise CorruptionError(f"compressed block claims an impossible size ({declared} bytes from "
                              f"{len(payload)})", path=path, offset=offset)
    return kind, payload, declared


class Footer:
    __slots__ = ("index", "filter", "properties", "version")

    def __init__(self, index: tuple[int, int], filter: tuple[int, int], properties: tuple[int, int],
                 version: int = FORMAT_VERSION) -> None:
        self.index = index
        self.filter = filter
        self.properties = properties
        self.version = version

    def encode(self) -> bytes:
        head = struct.pack("<QQQQQQI", *self.index, *self.filter, *self.properties, self.version)
        return head + struct.pack("<IQ", crc32(head), TABLE_MAGIC)

    @classmethod
    def decode(cls, data: bytes, path: str, file_size: int) -> "Footer":
        offset = file_size - FOOTER_SIZE
        if len(data) != FOOTER_SIZE:
            raise CorruptionError(f"file of {file_size} bytes is too short to be a table", path=path, offset=0)
        (i_off, i_size, f_off, f_size, p_off, p_size, version, crc, magic) = FOOTER.unpack(data)
        if magic != TABLE_MAGIC:
            raise CorruptionError("not a table file (bad magic number)", path=path, offset=offset)
        if crc32(data[:_FOOTER_CRC_SPAN]) != crc:
            raise CorruptionError("table footer checksum mismatch", path=path, offset=offset)
        if version < OLDEST_FORMAT_VERSION:
            raise CorruptionError(f"table footer names format version {version}, which never existed",
                                  path=path, offset=offset)
        if version > FORMAT_VERSION:
            from lsmkv.base.errors import InvalidDatabaseError
            raise InvalidDatabaseError(
                f"{path}: table format version {version} is newer than this lsmkv understands ({FORMAT_VERSION}); upgrade lsmkv")
        for off, size in ((i_off, i_size), (f_off, f_size), (p_off, p_size)):
            if off + size + TRAILER_SIZE > offset:
                raise CorruptionError("table footer points past the end of the data", path=path, offset=offset)
        return cls((i_off, i_size), (f_off, f_size), (p_off, p_size), version)
