"""TableProperties: what a table says about itself in its properties block.

Stored with the block codec: one entry per property, keys are the property
names in ascending order, values are decimal ASCII integers or raw bytes
(smallest_key, largest_key, compression). Readers ignore names they do not
know, so properties can be added without a format version change.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from lsmkv.base.errors import CorruptionError

from .block import CODEC_OFFSETS, decode_block, encode_block

_BYTES_FIELDS = {"smallest_key", "largest_key", "compression"}
#: Properties written only when not zero.
_OMITTED_WHEN_ZERO = {"ttl_entries", "earliest_deadline", "range_tombstones", "range_del_offset", "range_del_size"}


@dataclass
class TableProperties:
    entries: int = 0
    tombstones: int = 0
    #: Entries of kind 2 (values with a ttl), and the earliest of their
    #: deadlines (ms since the epoch); both 0 (and not written) without ttls.
    ttl_entries: int = 0
    earliest_deadline: int = 0
    #: Range tombstone records (fragment, sequence) in the range-tombstone
    #: block, and that block's handle (offset, payload size); all 0 (and not
    #: written) in a table without range tombstones (range_del_block.py).
    range_tombstones: int = 0
    range_del_offset: int = 0
    range_del_size: int = 0
    #: Distinct user keys (the bloom filter's key count).
    distinct_keys: int = 0
    smallest_key: bytes = b""
    largest_key: bytes = b""
    smallest_seq: int = 0
    largest_seq: int = 0
    raw_key_bytes: int = 0
    raw_value_bytes: int = 0
    data_blocks: int = 0
    #: Bytes of data blocks as stored (compressed, with trailers).
    data_bytes: int = 0
    index_bytes: int = 0
    filter_bytes: int = 0
    compression: bytes = b"none"

    def encode(self) -> bytes:
        items = []
        for f in sorted(fields(self), key=lambda f: f.name):
            value = getattr(self, f.name)
            if f.name in _OMITTED_WHEN_ZERO and not value:
                continue  # a table without ttls is written exactly as before they existed
            items.append((f.name.encode(), value if f.name in _BYTES_FIELDS else str(value).encode()))
        return encode_block([k for k, _ in items], [0] * len(items), [v for _, v in items])

    @classmethod
    def decode(cls, raw: bytes, path: str, offset: int, codec: int = CODEC_OFFSETS) -> "TableProperties":
        block = decode_block(raw, path, offset, codec)
        props = cls()
        known = {f.name for f in fields(cls)}
        for i, key in enumerate(block.keys):
            name = key.decode("ascii", "replace")
            if name not in known:
                continue
            value = block.value(i)
            if name in _BYTES_FIELDS:
                setattr(props, name, value)
            else:
                try:
                    setattr(props, name, int(value))
                except ValueError:
                    raise CorruptionError(f"table property {name} is not a number", path=path, offset=offset) from None
        return props

    def as_dict(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.decode("latin-1") if f.name == "compression" else value
        return out
