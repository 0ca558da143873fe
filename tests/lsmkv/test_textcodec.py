"""The command line's encoding of keys and values (lsmkv/terminal/textcodec.py) and
its entry lines (lsmkv/terminal/cli_entries.py): lossless, one entry a line, in the
plain, --hex and --json forms."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsmkv.terminal.cli_entries import bytes_from_arg, entry_line, jsonable, shown
from lsmkv.terminal.textcodec import TextDecodeError, decode, decode_hex, encode, encode_hex

PRINTABLE = set(range(0x20, 0x7F))
entries = st.dictionaries(st.binary(max_size=40), st.binary(max_size=60), max_size=30)


@given(st.binary(max_size=200))
@settings(max_examples=500)
def test_decode_gives_back_the_bytes_of_every_encoding(data):
    text = encode(data)
    assert decode(text) == data
    assert bytes_from_arg(text, hex=False) == data
    assert decode_hex(encode_hex(data)) == data == bytes_from_arg(shown(data, hex=True), hex=True)


@given(st.binary(max_size=200))
def test_an_encoding_is_printable_ascii_with_no_tab_or_newline(data):
    raw = encode(data).encode("ascii")
    assert set(raw) <= PRINTABLE  # no tab, newline, carriage return, NUL, DEL or high byte
    # Printable bytes other than the backslash stand for themselves; everything else is escaped.
    assert len(raw) == sum(1 if b in PRINTABLE and b != 0x5C else 2 if b in b"\\\t\n\r" else 4 for b in data)


@pytest.mark.parametrize("data,text", [
    (b"user:1 alice", "user:1 alice"),
    (b"a\\b", "a\\\\b"),
    (b"\t\n\r", "\\t\\n\\r"),
    (b"\x00\x7f\x80\xff", "\\x00\\x7f\\x80\\xff"),
    (b"\\x41", "\\\\x41"),  # a backslash followed by 'x41' is not the escape of 'A'
    ("café".encode(), "caf\\xc3\\xa9"),
])
def test_the_documented_escapes(data, text):
    assert encode(data) == text and decode(text) == data


def test_decode_takes_typed_text_as_its_bytes():
    assert decode("caf\\xC3\\xA9") == decode("café") == "café".encode()  # either case of hex digit; UTF-8
    assert decode("\udcff") == b"\xff"  # argv's undecodable byte (surrogateescape) is that byte again
    assert decode("") == b""


@pytest.mark.parametrize("text,where", [
    ("a\\", "at position 1 starts no escape (at the end)"),
    ("a\\q", "at position 1 starts no escape (followed by 'q')"),
    ("\\x4", "at position 0 starts no escape (followed by 'x4')"),
    ("\\xg0", "at position 0 starts no escape"),
    ("\\0", "at position 0 starts no escape"),
])
def test_a_backslash_that_starts_no_escape_is_an_error(text, where):
    with pytest.raises(TextDecodeError, match="the escapes are") as err:
        decode(text)
    assert where in str(err.value) and "\n" not in str(err.value)


def test_hex_input_that_is_not_hex_is_an_error():
    with pytest.raises(TextDecodeError, match="'zz' is not hexadecimal"):
        decode_hex("zz")
    with pytest.raises(TextDecodeError, match="is not hexadecimal"):
        bytes_from_arg("abc", hex=True)


def _parse_plain(output: str, hex: bool) -> list[tuple[bytes, bytes]]:
    to_bytes = bytes.fromhex if hex else decode
    pairs = []
    for line in output.split("\n")[:-1]:
        key, value = line.split("\t")  # exactly one tab a line
        pairs.append((to_bytes(key), to_bytes(value)))
    return pairs


def _parse_json(output: str, hex: bool) -> list[tuple[bytes, bytes]]:
    to_bytes = bytes.fromhex if hex else decode
    return [(to_bytes(obj["key"]), to_bytes(obj["value"])) for obj in map(json.loads, output.splitlines())]


@given(entries, st.booleans(), st.booleans())
@settings(max_examples=300)
def test_entry_lines_are_one_entry_a_line_and_round_trip(table, hex, as_json):
    pairs = sorted(table.items())
    output = "".join(entry_line(k, v, hex=hex, as_json=as_json) + "\n" for k, v in pairs)
    assert output.count("\n") == len(pairs)
    parse = _parse_json if as_json else _parse_plain
    assert parse(output, hex) == pairs


@given(st.recursive(st.binary(max_size=20) | st.integers() | st.text(max_size=5),
                    lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(st.text(max_size=5), children, max_size=3), max_leaves=10))
def test_jsonable_turns_bytes_at_any_depth_into_their_encoding(obj):
    def back(x, original):
        if isinstance(original, bytes):
            return decode(x)
        if isinstance(original, dict):
            return {k: back(x[k], v) for k, v in original.items()}
        if isinstance(original, list):
            return [back(a, b) for a, b in zip(x, original)]
        return x
    converted = json.loads(json.dumps(jsonable(obj)))
    assert back(converted, obj) == obj
