"""The binary searches over sorted bytes keys (lsmkv/base/key_search.py)
that the memtable's index insert and the B+tree's descent use: in the
compiled build a byte loop in C, in the pure build bisect's own functions.
Each build's loop (the byte_loop_ names) and each build's chosen form (the
keys_ names) must answer what bisect answers."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings, strategies as st

from lsmkv.base import key_search

#: Keys of a few bytes drawn from 0x00, 0x55, 0xaa and 0xff: shared
#: prefixes, empty keys and bytes at either end of the range.
_keys = st.binary(max_size=5).map(lambda b: bytes(c % 4 * 85 for c in b))

SEARCHES = {
    "right": (bisect.bisect_right, key_search.keys_bisect_right, key_search.byte_loop_bisect_right),
    "left": (bisect.bisect_left, key_search.keys_bisect_left, key_search.byte_loop_bisect_left),
}


@settings(max_examples=200, deadline=None)
@given(st.lists(_keys, max_size=40), _keys)
@pytest.mark.parametrize("side", sorted(SEARCHES))
def test_the_key_searches_answer_what_bisect_answers(side, keys, key):
    keys.sort()
    want, *searches = SEARCHES[side]
    for search in searches:
        assert search(keys, key) == want(keys, key)
    for insort in (key_search.keys_insort, key_search.byte_loop_insort):
        got = list(keys)
        insort(got, key)
        assert got == sorted([*keys, key])


def test_the_key_searches_refuse_a_key_that_is_not_bytes():
    """The compiled searches read the keys' bytes in place: anything else is
    refused (TypeError), as bisect refuses to compare bytes with str."""
    for _want, *searches in SEARCHES.values():
        for search in searches:
            with pytest.raises(TypeError):
                search([b"a", b"b"], "b")
    for insort in (key_search.keys_insort, key_search.byte_loop_insort):
        with pytest.raises(TypeError):
            insort([b"a", b"b"], "b")


@settings(max_examples=300, deadline=None)
@given(st.lists(_keys, max_size=30), _keys, st.booleans())
def test_new_key_flags_say_where_a_sorted_run_moves_to_a_new_key_or_refuse_it(keys, last, in_order):
    """A table builder's order check of a sorted run: both builds' forms
    (the byte loop and the pure build's maps) give, for a run ascending
    from ``last``, each key's "above the one before" flag, and None for a
    run with a key below the one before it."""
    if in_order:
        keys = sorted(k for k in keys if k >= last)
    ordered = all(a <= b for a, b in zip([last, *keys], keys))
    want = [a != b for a, b in zip([last, *keys], keys)] if ordered else None
    for flags in (key_search.new_key_flags, key_search.byte_loop_new_key_flags,
                  key_search._new_key_flags_by_map):
        assert flags(keys, last) == want
