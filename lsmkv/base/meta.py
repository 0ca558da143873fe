"""Metadata entries: names and values stored beside a database's data.

``batch.set_meta(name, value)`` stores an entry atomically with the rest of
a write batch, in a namespace of its own (gets, scans and ``len()`` never
see it; ``db.get_meta(name)`` and ``db.meta()`` do). A loader keeps its
source offsets there. Both engines check an entry and show their entries
in ``stats()`` the same way: this module. How each engine stores them is
its own (the LSM as kind 3 in its write batches, lsmkv/lsm/write_batch.py;
the B+tree in its log and meta pages).
"""

from __future__ import annotations

from .errors import SizeLimitError
from .keys import as_value

#: Longest metadata name (UTF-8 bytes) and value.
MAX_META_NAME = 255
MAX_META_VALUE = 1024 * 1024


def meta_entry(name: object, value: object) -> tuple[bytes, bytes]:
    """A metadata entry as both engines store it: (name as UTF-8, value),
    checked (TypeError, ValueError or SizeLimitError naming the problem)."""
    if not isinstance(name, str):
        raise TypeError(f"metadata name must be str, not {type(name).__name__}")
    n = name.encode("utf-8")
    if not 0 < len(n) <= MAX_META_NAME:
        raise ValueError(f"metadata name must be 1 to {MAX_META_NAME} bytes of UTF-8, not {len(n)}")
    v = as_value(value)
    if len(v) > MAX_META_VALUE:
        raise SizeLimitError(f"metadata value of {len(v)} bytes is over the {MAX_META_VALUE}-byte limit")
    return n, v


def describe_meta(entries: dict) -> dict[str, str]:
    """Metadata entries as ``stats()`` shows them: a short printable value
    as its text (a loader's offset reads as the number it is), anything
    else as its size."""
    shown = {}
    for name, value in sorted(entries.items()):
        if isinstance(name, bytes):
            name = name.decode("utf-8", "replace")
        text = None
        if len(value) <= 64:
            try:
                text = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None and not text.isprintable():
                text = None
        shown[name] = text if text is not None else f"<{len(value)} bytes>"
    return shown
