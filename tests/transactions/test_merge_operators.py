"""The built-in merge operators and the checks around any operator (lsmkv/base/merge_operators.py)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from lsmkv.base.errors import InvalidArgumentError, MergeError
from lsmkv.base.merge_operators import Append, Max, UInt64Add, check_operand, fold, operator_name

deltas = st.integers(min_value=-(2 ** 70), max_value=2 ** 70)


@given(st.one_of(st.none(), st.integers(0, 2 ** 64 - 1)), st.lists(deltas, max_size=20))
def test_uint64add_is_the_sum_modulo_2_to_the_64(start, adds):
    add = UInt64Add()
    existing = None if start is None else struct.pack("<Q", start)
    result = add(b"k", existing, [UInt64Add.operand(d) for d in adds])
    assert UInt64Add.decode(result) == ((start or 0) + sum(adds)) % 2 ** 64


@given(st.lists(deltas, min_size=1, max_size=12), st.integers(0, 11))
def test_folding_in_two_steps_gives_what_one_step_gives(adds, cut):
    """A compaction folds some operands early; a read folds the rest onto its result."""
    add, operands = UInt64Add(), [UInt64Add.operand(d) for d in adds]
    cut = min(cut, len(operands))
    assert add(b"k", add(b"k", None, operands[:cut]), operands[cut:]) == add(b"k", None, operands)


def test_uint64add_refuses_what_is_not_a_counter():
    with pytest.raises(InvalidArgumentError, match="8 bytes .* not 3"):
        check_operand(UInt64Add(), b"abc")
    check_operand(UInt64Add(), UInt64Add.operand(5))
    with pytest.raises(MergeError, match="its value is 2 bytes"):
        UInt64Add()(b"k", b"no", [UInt64Add.operand(1)])
    with pytest.raises(TypeError):
        UInt64Add.operand(1.5)
    with pytest.raises(TypeError):
        UInt64Add.operand(True)


def test_append_and_max():
    assert Append(b"|")(b"k", None, [b"a", b"b"]) == b"a|b"
    assert Append(b"|")(b"k", b"x", [b"a"]) == b"x|a"
    assert Append()(b"k", b"", [b"a"]) == b",a"
    assert Max()(b"k", None, [b"b", b"c", b"a"]) == b"c"
    assert Max()(b"k", b"d", [b"b", b"c"]) == b"d"
    with pytest.raises(TypeError):
        Append(",")


def test_names_tell_operators_apart():
    assert operator_name(UInt64Add()) == "lsmkv.uint64add"
    assert operator_name(Append(b",")) != operator_name(Append(b"|"))
    assert operator_name(Max()) == "lsmkv.max"

    def concat(key, existing, operands):
        return b"".join([existing or b"", *operands])
    assert operator_name(concat).endswith("concat")


def test_fold_names_the_key_and_operator_when_an_operator_fails_or_returns_no_bytes():
    def broken(key, existing, operands):
        raise KeyError("oops")
    with pytest.raises(MergeError, match=r"broken failed on key b'k1'.*KeyError"):
        fold(broken, b"k1", None, [b"x"])
    with pytest.raises(MergeError, match="returned str"):
        fold(lambda key, existing, operands: "text", b"k", None, [b"x"])
    assert fold(lambda key, existing, operands: bytearray(b"ok"), b"k", None, [b"x"]) == b"ok"
    assert fold(Max(), b"k", b"a", [b"b"]) == b"b"
