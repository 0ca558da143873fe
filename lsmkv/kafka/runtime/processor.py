"""User processors: what a record becomes before it is stored.

A processor is a function ``process(record) -> result`` (``--processor
module:function`` on the command line, ``processor=`` in the Python API).
It receives a :class:`Record` and returns:

* ``(key, value)``: store ``value`` under ``key`` (bytes each; a different
  key than the record's is allowed);
* ``(key, None)``: delete ``key``;
* ``None``: store nothing for this record (skip it).

It may block (an enrichment call to another service): processor units run
it concurrently, and records of one key still go through it one at a time
in offset order. If it raises, the record is retried with exponential
backoff and, after the last retry, sent to the dead-letter topic with the
error as the reason; records of the same key wait behind it meanwhile. A
processor runs at least once per record (a record replayed after a crash
or a partition move is processed again), so its side effects should be
idempotent; its effect on the store happens exactly once.

Without a processor a record's key and value are stored as they are, a
null value deleting the key (a compacted topic's tombstone).

This module owns the record type and the check of a processor's result
(a ``module:function`` text is turned into the processor by
``load_processor``, settings.py); it never touches a store.
"""

from __future__ import annotations

from typing import Callable

from lsmkv.base.keys import MAX_VALUE_SIZE

#: One store operation: (key, value) puts, (key, None) deletes.
Op = tuple[bytes, "bytes | None"]
Processor = Callable[["Record"], "tuple[bytes, bytes | None] | None"]


class Record:
    """A Kafka record as a processor sees it (read-only by convention)."""

    __slots__ = ("topic", "partition", "offset", "key", "value", "headers", "timestamp")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
                 headers: list | None = None, timestamp: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        #: [(name, value bytes)] as the producer set them, or None.
        self.headers = headers
        #: Milliseconds since the epoch (the record's timestamp), 0 if unknown.
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return f"Record({self.topic}[{self.partition}]@{self.offset}, key={self.key!r})"


class BadResult(Exception):
    """A processor returned something that cannot be stored (a bug in the
    processor, or a key the store cannot hold): handled like a raise."""


def store_ops(result: object, max_key: int) -> list[Op] | None:
    """The store operations of a processor's ``result`` (None: skip), or
    BadResult naming what is wrong with it."""
    if result is None:
        return None
    if type(result) is not tuple or len(result) != 2:
        raise BadResult(f"a processor must return (key, value), (key, None) or None, not {type(result).__name__}")
    key, value = result
    if type(key) is not bytes:
        if not isinstance(key, (bytearray, memoryview)):
            raise BadResult(f"the key a processor returns must be bytes, not {type(key).__name__}")
        key = bytes(key)
    if len(key) > max_key:
        raise BadResult(f"the key is {len(key)} bytes; the store takes at most {max_key}")
    if value is not None and type(value) is not bytes:
        if not isinstance(value, (bytearray, memoryview)):
            raise BadResult(f"the value a processor returns must be bytes or None, not {type(value).__name__}")
        value = bytes(value)
    if value is not None and len(value) > MAX_VALUE_SIZE:
        raise BadResult(f"the value is {len(value)} bytes; the store takes at most {MAX_VALUE_SIZE}")
    return [(key, value)]
