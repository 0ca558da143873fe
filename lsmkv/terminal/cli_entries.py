"""How the command lines take keys and values as arguments and print entries.

One encoding everywhere (lsmkv/terminal/textcodec.py): the escaped text form by
default, hexadecimal with ``--hex``, for what is typed and what is printed
alike. An entry prints as one line, ``KEY<TAB>VALUE``; with ``--json`` as
one JSON object a line, ``{"key": KEY, "value": VALUE}``, whose strings are
in that same form (``textcodec.decode`` or ``bytes.fromhex`` of a string
gives the bytes back). ``lsmkv scan``, ``get``, ``sst-dump``, ``stats``,
``repair`` and ``lsmkv kafka query`` all print through here.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from . import textcodec

__all__ = ["bytes_from_arg", "entry_line", "entry_object", "jsonable", "print_entries", "shown"]


def bytes_from_arg(text: str, hex: bool) -> bytes:
    """The bytes a command-line argument stands for (TextDecodeError if it is not a valid encoding)."""
    return textcodec.decode_hex(text) if hex else textcodec.decode(text)


def shown(data: bytes, hex: bool) -> str:
    """``data`` as printed: escaped text, or hexadecimal."""
    return textcodec.encode_hex(data) if hex else textcodec.encode(data)


def entry_object(key: bytes, value: bytes | None, *, hex: bool) -> dict[str, str | None]:
    """``{"key": KEY, "value": VALUE}`` in the printed form (a None value, absent, as None: JSON's null)."""
    return {"key": shown(key, hex), "value": None if value is None else shown(value, hex)}


def entry_line(key: bytes, value: bytes, *, hex: bool, as_json: bool) -> str:
    """One entry as one line (no newline at the end)."""
    if as_json:
        return json.dumps(entry_object(key, value, hex=hex))
    return f"{shown(key, hex)}\t{shown(value, hex)}"


def print_entries(entries: Iterable[tuple[bytes, bytes]], *, hex: bool, as_json: bool) -> int:
    """Print each (key, value) on a line of its own; returns how many."""
    write = sys.stdout.write
    n = 0
    for key, value in entries:
        write(entry_line(key, value, hex=hex, as_json=as_json) + "\n")
        n += 1
    return n


def jsonable(obj: Any, hex: bool = False) -> Any:
    """``obj`` with its bytes (at any depth) in the printed form, ready for json.dumps or a line."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return shown(bytes(obj), hex)
    if isinstance(obj, dict):
        return {str(k): jsonable(v, hex) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, hex) for v in obj]
    return obj
