r"""The text form of keys and values on the command line: lossless and line-safe.

Keys and values are bytes; a terminal line is text. ``encode`` writes each
byte of a key or value as:

* a printable ASCII byte (0x20, space, to 0x7e, ``~``) other than the
  backslash: the byte itself;
* the backslash: ``\\``;
* tab, newline, carriage return: ``\t``, ``\n``, ``\r``;
* any other byte (the other control bytes, 0x7f, 0x80 to 0xff): ``\xNN``,
  two lower-case hex digits.

So an encoded key or value is ASCII without a tab or a newline in it: a
line ``KEY<TAB>VALUE`` is exactly one entry, whatever the bytes, and
``decode(encode(data)) == data`` for every ``data``.

``decode`` reverses it: it takes the escapes above (hex digits of either
case) and takes every other character as its UTF-8 bytes, so arguments
typed at a shell mean their bytes (``lsmkv get DB café`` and
``lsmkv get DB 'caf\xc3\xa9'`` ask for the same key); a character the OS
could not decode (Python's surrogateescape) becomes that very byte again.
A backslash that starts none of the escapes is an error.

``decode_hex`` is the other input form (``--hex``): hexadecimal digits,
two a byte; ``encode_hex`` (``bytes.hex``) is its output counterpart.
"""

from __future__ import annotations

import re

__all__ = ["TextDecodeError", "decode", "decode_hex", "encode", "encode_hex"]


class TextDecodeError(ValueError):
    """A text that is not a valid encoding of bytes (a bad escape, a bad hex digit)."""


def _escape_of(byte: int) -> str:
    if byte == 0x5C:
        return "\\\\"
    if 0x20 <= byte <= 0x7E:
        return chr(byte)
    return {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}.get(byte, f"\\x{byte:02x}")


#: The text of each byte value.
_ESCAPES = tuple(_escape_of(b) for b in range(256))
#: Any byte that is not written as itself.
_NEEDS_ESCAPE = re.compile(rb"[^\x20-\x5b\x5d-\x7e]")
#: A backslash and what may follow it.
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[\\tnr])?")
_NAMED = {"\\": b"\\", "t": b"\t", "n": b"\n", "r": b"\r"}


def encode(data: bytes) -> str:
    """The text form of ``data``: ASCII, no tab or newline, ``decode`` gives ``data`` back."""
    if not _NEEDS_ESCAPE.search(data):
        return data.decode("ascii")
    return "".join(map(_ESCAPES.__getitem__, data))


def decode(text: str) -> bytes:
    """The bytes ``text`` stands for (the inverse of :func:`encode`).

    Raises TextDecodeError for a backslash that starts no escape.
    """
    if "\\" not in text:
        return _literal(text)
    out = bytearray()
    pos = 0
    for match in _ESCAPE.finditer(text):
        out += _literal(text[pos:match.start()])
        escape = match.group(1)
        if escape is None:
            after = text[match.end():match.end() + 3]
            raise TextDecodeError(
                f"the backslash at position {match.start()} starts no escape "
                f"({f'followed by {after!r}' if after else 'at the end'}); the escapes are \\\\, \\t, \\n, "
                f"\\r and \\xNN (two hex digits), so a backslash itself is written \\\\")
        out += bytes((int(escape[1:], 16),)) if escape[0] == "x" else _NAMED[escape]
        pos = match.end()
    out += _literal(text[pos:])
    return bytes(out)


def _literal(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that is not an undecodable byte
        raise TextDecodeError(f"{text!r} holds a character that has no UTF-8 form") from None


def encode_hex(data: bytes) -> str:
    """``data`` as lower-case hexadecimal, two digits a byte."""
    return data.hex()


def decode_hex(text: str) -> bytes:
    """The bytes of hexadecimal ``text`` (either case; TextDecodeError if it is not hex)."""
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise TextDecodeError(f"{text!r} is not hexadecimal (two hex digits a byte)") from None
