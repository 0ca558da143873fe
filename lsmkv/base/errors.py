"""The one error hierarchy shared by both engines (lsmkv and btree).

Every error says what was wrong and, where it can, what to do about it. The CLI
turns any LsmkvError into one line on stderr and a non-zero exit code.

Wrong argument *types* raise the built-in TypeError and size-limit violations
raise SizeLimitError, which is also a ValueError, so callers can catch the
standard exceptions they already expect.
"""

from __future__ import annotations


class LsmkvError(Exception):
    """Base class of every error raised by lsmkv and btree."""


class CorruptionError(LsmkvError):
    """Stored data failed a checksum or structural check.

    ``path`` names the file and ``offset`` the byte offset (or ``page`` the page
    number, for the B-tree) where the problem was found. Corrupt data is never
    returned to the caller as if it were valid.
    """

    def __init__(self, message: str, *, path: str | None = None,
                 offset: int | None = None, page: int | None = None) -> None:
        self.path = path
        self.offset = offset
        self.page = page
        where = []
        if path is not None:
            where.append(str(path))
        if page is not None:
            where.append(f"page {page}")
        if offset is not None:
            where.append(f"offset {offset}")
        text = f"{message} ({', '.join(where)})" if where else message
        super().__init__(text)
        self.reason = message


class LockError(LsmkvError):
    """Another process holds the database open for writing."""


class ReadOnlyError(LsmkvError):
    """A write was attempted on a database opened with read_only=True."""


class ClosedError(LsmkvError):
    """The database (or a snapshot or iterator of it) was used after close()."""


class SnapshotEndedError(LsmkvError):
    """A snapshot (or a cursor, which reads through one) can no longer be
    read because its handle reloaded its view of the database: on btree, a
    writer's ``compact_range()``, ``ingest()`` or failed write, or a
    read-only handle moving to a writer's newer checkpoint. The message
    names the reason; take a new snapshot or cursor (docs/api.md)."""


class BackgroundError(LsmkvError):
    """Writes are stopped after a failure (an I/O error writing the log, a
    flush, a compaction or a checkpoint), or this call hit that failure.

    Reads keep working. The original exception is chained as ``__cause__``
    and its errno (e.g. ``errno.ENOSPC`` for a full disk) is ``errno``.
    ``db.resume()`` retries once the cause is gone (docs/reliability.md).
    """

    @property
    def errno(self) -> int | None:
        cause = self.__cause__
        while cause is not None:
            if isinstance(cause, OSError):
                return cause.errno
            cause = cause.__cause__
        return None


class SyncTimeoutError(LsmkvError, TimeoutError):
    """A ``sync=True`` write was not confirmed durable within ``sync_timeout``.

    What is promised about that write (docs/reliability.md) depends on
    ``applied``. True: it was applied (readers see it, later writes are
    ordered after it) and handed to the OS, so a crash of the process does
    not lose it; it is not known to be on disk, so a power loss or an OS
    crash before the log's next successful sync may lose it. It is never
    rolled back: the next sync that succeeds (another ``sync=True`` write,
    ``flush()``, ``close()``) makes it durable with everything before it.
    False: it was still waiting for its turn (the log syncer was busy with
    an earlier group, on a slow or stalled disk) and was dropped: nothing of
    it is applied or written, so it can simply be retried. ``position`` is
    the log position (the LSM's sequence number, the B+tree's LSN) an
    applied write needed durable.
    """

    def __init__(self, message: str, position: int | None = None, *, applied: bool = True) -> None:
        super().__init__(message)
        self.position = position
        self.applied = applied


class InvalidDatabaseError(LsmkvError):
    """The path is not a database of the engine asked for (a file, another
    engine's directory, an unrelated non-empty directory, or a format version
    newer than this code understands)."""


class SizeLimitError(LsmkvError, ValueError):
    """A key, value or batch is larger than the documented limit."""


class OptionError(LsmkvError, ValueError):
    """An option has an invalid value or is unknown."""


class InvalidArgumentError(LsmkvError, ValueError):
    """An argument of the right type has a value the call does not accept
    (a ``ttl`` that is not a positive number of seconds, say)."""


class ConflictError(LsmkvError):
    """A transaction could not commit: since its snapshot was taken, another
    commit changed a key it read or wrote, or wrote a key inside a range it
    scanned (lsmkv/base/conflicts.py). Nothing of the transaction was
    written; run it again from the start (``run_in_transaction`` in
    lsmkv/base/retry.py does, with backoff).

    ``key`` is the key that conflicted (None for a conflict over a range
    alone), ``range`` the ``(low, high)`` range (low inclusive, high
    exclusive, None for an open end) when a scanned range or a deleted range
    was involved, and ``access`` what the transaction did with it:
    ``"read"``, ``"written"``, ``"scanned"`` or ``"deleted"``.
    """

    def __init__(self, message: str, *, key: bytes | None = None,
                 range: tuple[bytes | None, bytes | None] | None = None,  # noqa: A002 - the attribute's name
                 access: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.range = range
        self.access = access


class MergeError(LsmkvError):
    """A merge operator could not fold a key's value and operands: the
    message names the key, the operator and why (lsmkv/base/merge_operators.py)."""
