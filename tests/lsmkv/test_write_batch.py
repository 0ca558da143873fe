"""Write batch encoding."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from lsmkv.base.errors import CorruptionError
from lsmkv.lsm.write_batch import TOMBSTONE, VALUE, decode_batch, encode_batch, encode_single

ops_strategy = st.lists(st.one_of(
    st.tuples(st.just(VALUE), st.binary(max_size=40), st.binary(max_size=80)),
    st.tuples(st.just(TOMBSTONE), st.binary(max_size=40), st.just(b""))), max_size=30)


@given(st.integers(0, 2**56), ops_strategy)
def test_round_trip(seq, ops):
    assert decode_batch(encode_batch(seq, ops), "p", 0) == (seq, ops)


def test_single_matches_batch_encoding():
    assert encode_single(5, VALUE, b"k", b"v") == encode_batch(5, [(VALUE, b"k", b"v")])


@given(st.binary(max_size=200))
def test_garbage_raises_corruption_or_decodes(data):
    try:
        seq, ops = decode_batch(data, "p", 0)
    except CorruptionError:
        return
    assert encode_batch(seq, ops) == data


def test_truncation_is_corruption():
    data = encode_batch(1, [(VALUE, b"key", b"value")])
    for cut in range(len(data)):
        with pytest.raises(CorruptionError):
            decode_batch(data[:cut], "p", 0)
