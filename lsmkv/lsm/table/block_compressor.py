"""BlockCompressor: a table builder's data blocks, compressed where it pays.

A block is stored compressed only when that saves at least 1/8 of its bytes
(format.compress_block). Values that do not compress (random bytes,
already-compressed or encrypted payloads) fail that test block after block,
and each failed attempt costs a whole zstd pass over the block: about 11 µs
for 4 KiB of random bytes, more than encoding the block. So after a block
that does not compress, the next ones are stored without trying: one after
the first failure, then two, four, ... up to ``MAX_SKIPPED`` in a row while
the failures go on. One block that compresses ends the back-off. A table of
incompressible values then tries about one block in ``MAX_SKIPPED + 1``;
compressible data is never skipped; where the data changes from one kind to
the other, at most ``MAX_SKIPPED`` blocks are stored raw that might have
compressed. A skipped block is stored exactly as a failed attempt stores
it, so readers cannot tell the difference.

A flush or compaction hands its blocks over many at a time (``store_many``):
the ones it tries are compressed by one zstd call per ``BATCH`` of them.
Each zstd call lets go of the GIL, and a background thread taking it back
waits up to a switch interval (5 ms) while a user thread is busy: 600
blocks compressed one call each took 1.1 s beside a busy loop, in calls of
32 blocks 0.1 s. The stored bytes and the back-off are the same as block
by block; a failure in a batch leaves the rest of it unused (the back-off
then skips them).
"""

from __future__ import annotations

import zstandard

from .format import NO_COMPRESSION, TRAILER_SIZE, compress_block, stored_block

#: The longest run of data blocks stored without a compression attempt.
MAX_SKIPPED = 64
#: Blocks compressed by one zstd call in ``store_many``.
BATCH = 32


class BlockCompressor:
    """Stores raw data blocks for one table (module docstring)."""

    __slots__ = ("compressor", "skip", "backoff", "attempts", "skipped")

    def __init__(self, compressor: zstandard.ZstdCompressor | None) -> None:
        #: None: every block is stored raw.
        self.compressor = compressor
        #: Blocks still to store without trying.
        self.skip = 0
        #: The skip after the next failure (0: none failed since the last success).
        self.backoff = 0
        #: Compression attempts made, and blocks stored without one.
        self.attempts = 0
        self.skipped = 0

    def store(self, raw: bytes) -> bytes:
        """``raw`` as it goes into the file: ``payload | type | crc``."""
        compressor = self.compressor
        if compressor is None:
            return compress_block(raw, None)
        if self.skip:
            self.skip -= 1
            self.skipped += 1
            return compress_block(raw, None)
        return self._attempted(raw, compressor.compress(raw))

    def store_many(self, raws: list[bytes]) -> list[bytes]:
        """:meth:`store` of each of ``raws`` in order (the same bytes, the
        same back-off), the blocks tried compressed ``BATCH`` at a time by
        one zstd call (module docstring)."""
        compressor = self.compressor
        if compressor is None:
            return [compress_block(raw, None) for raw in raws]
        out = []
        i = 0
        n = len(raws)
        while i < n:
            batch = raws[i:i + BATCH]
            if self.skip or len(batch) == 1 or not all(batch):  # (zstd's batch call refuses empty inputs)
                out.append(self.store(raws[i]))
                i += 1
                continue
            frames = compressor.multi_compress_to_buffer(batch)
            for j, raw in enumerate(batch):
                if self.skip:
                    break  # (a block did not compress: the back-off decides the rest)
                out.append(self._attempted(raw, frames[j].tobytes()))
                i += 1
        return out

    def _attempted(self, raw: bytes, packed: bytes) -> bytes:
        """``raw`` stored after an attempt that made the zstd frame ``packed``."""
        self.attempts += 1
        stored = stored_block(raw, packed)
        if stored[-TRAILER_SIZE] == NO_COMPRESSION:
            self.backoff = min(MAX_SKIPPED, self.backoff * 2) if self.backoff else 1
            self.skip = self.backoff
        else:
            self.backoff = 0
        return stored
