"""Where a store keeps the Kafka offsets it has applied.

Each partition's progress lives in the store's metadata namespace
(``batch.set_meta``; lsmkv/base/meta.py), written in the same write batch
as the records it covers, so the store's data and its offsets never
disagree, whatever crash comes. The entry of topic ``T`` partition ``P``
is named ``kafka:T:P`` (``:`` cannot appear in a topic name) and holds the
offset of the next record to apply, in ASCII decimal (Kafka's convention
for a committed offset), so ``lsmkv stats`` shows it as it is.

This module owns that naming and encoding; it never writes by itself.
"""

from __future__ import annotations

from lsmkv.base.errors import CorruptionError
from lsmkv.base.meta import MAX_META_NAME

PREFIX = "kafka:"


def meta_name(topic: str, partition: int) -> str:
    """The metadata entry of ``topic``/``partition``."""
    name = f"{PREFIX}{topic}:{partition}"
    if len(name.encode()) > MAX_META_NAME:
        raise ValueError(f"topic name {topic[:40]!r}... is too long to name its offsets in the store "
                         f"({len(name.encode())} bytes, the limit is {MAX_META_NAME})")
    return name


def encode_offset(offset: int) -> bytes:
    return b"%d" % offset


def decode_offset(value: bytes, name: str) -> int:
    """The offset stored under ``name``; CorruptionError if it is not one."""
    if not value.isdigit() or len(value) > 20:
        raise CorruptionError(f"metadata entry {name!r} holds {value[:40]!r}, not a Kafka offset")
    return int(value)


def stored_offset(db, topic: str, partition: int) -> int | None:
    """The offset of the next record the store needs from this partition,
    or None if the store has never applied any of it."""
    name = meta_name(topic, partition)
    value = db.get_meta(name)
    return None if value is None else decode_offset(value, name)


def stored_offsets(db) -> dict[tuple[str, int], int]:
    """Every partition's offset the store holds: {(topic, partition): offset}."""
    out = {}
    for name, value in db.meta().items():
        if not name.startswith(PREFIX):
            continue
        topic, _, part = name[len(PREFIX):].rpartition(":")
        if topic and part.isdigit():
            out[(topic, int(part))] = decode_offset(value, name)
    return out
