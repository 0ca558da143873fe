"""Sorted runs of key/value pairs and the duplicate-key rule, for the
writer's tasks and its commit.

The rule, the same everywhere a write meets one key more than once (within
a task's rows, across a task's spilled runs, across tasks' files at
commit): **the greatest value in byte order wins**. It depends on the set
of rows only, never on Spark's partitioning or the order rows arrive in,
so a write is deterministic. Byte order is lexicographic over unsigned
bytes, Python's order of ``bytes``.

This module owns sorting a buffer under that rule (``resolve``), merging
sorted files under it (``merge``) and writing a sorted stream into table
files of a target size (``write_tables``); it never imports pyspark.
"""

from __future__ import annotations

import heapq
import os
import uuid
from itertools import islice
from typing import Iterable, Iterator

import lsmkv

_CHUNK = 4096


def resolve(keys: list[bytes], values: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """``keys``/``values`` sorted by key, one pair per key: the greatest value."""
    if not any(map(bytes.__ge__, keys[:-1], keys[1:])):
        return keys, values  # strictly ascending already (a range-partitioned, sorted write): C speed
    # Sorting the pairs orders equal keys by value; a dict keeps each key's
    # first position and its last (greatest) value.
    latest = dict(sorted(zip(keys, values)))
    return list(latest), list(latest.values())


def merge(streams: Iterable[Iterable[tuple[bytes, bytes]]]) -> Iterator[tuple[bytes, bytes]]:
    """Sorted, each-key-once streams merged into one, a key's greatest value winning."""
    merged = heapq.merge(*streams)
    missing = object()
    prev_key: object = missing
    prev_value = b""
    for key, value in merged:
        if key != prev_key:
            if prev_key is not missing:
                yield prev_key, prev_value  # type: ignore[misc]
            prev_key = key
        prev_value = value  # equal keys arrive in ascending value order: the last is the greatest
    if prev_key is not missing:
        yield prev_key, prev_value  # type: ignore[misc]


def table_name(directory: str, tag: str) -> str:
    return os.path.join(directory, f"{tag}-{uuid.uuid4().hex}.sst")


def write_tables(pairs: Iterable[tuple[bytes, bytes]], directory: str, tag: str,
                 target_bytes: int) -> list[lsmkv.TableInfo]:
    """Write a sorted, each-key-once stream into table files in
    ``directory`` of about ``target_bytes`` each; their infos in key order.
    On an error every file written is removed."""
    stream = iter(pairs)

    def chunks() -> Iterator[tuple[list[bytes], list[bytes]]]:
        while True:
            chunk = list(islice(stream, _CHUNK))
            if not chunk:
                return
            keys, values = zip(*chunk)
            yield list(keys), list(values)

    return _write_chunks(chunks(), directory, tag, target_bytes)


def write_sorted_lists(keys: list[bytes], values: list[bytes], directory: str, tag: str,
                       target_bytes: int) -> list[lsmkv.TableInfo]:
    """:func:`write_tables` for a resolved buffer (the lists :func:`resolve` returns)."""
    chunks = ((keys[i:i + _CHUNK], values[i:i + _CHUNK]) for i in range(0, len(keys), _CHUNK))
    return _write_chunks(chunks, directory, tag, target_bytes)


def _write_chunks(chunks: Iterable[tuple[list[bytes], list[bytes]]], directory: str, tag: str,
                  target_bytes: int) -> list[lsmkv.TableInfo]:
    done: list[lsmkv.TableInfo] = []
    writer: lsmkv.TableWriter | None = None
    try:
        for keys, values in chunks:
            if writer is None:
                writer = lsmkv.TableWriter(table_name(directory, tag))
            writer.put_sorted(keys, values)
            if writer.file_size >= target_bytes:
                done.append(writer.finish())
                writer = None
        if writer is not None:
            done.append(writer.finish())
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        remove(info.path for info in done)
        raise
    return done


def read(paths: Iterable[str]) -> list[Iterator[tuple[bytes, bytes]]]:
    return [lsmkv.read_table(p) for p in paths]


def remove(paths: Iterable[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass
