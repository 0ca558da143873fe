"""KeyRanges (lsmkv/base/key_ranges.py), the union of [low, high) ranges:
which range holds a key and whether two sets overlap agree with brute
force over random ranges with open ends, empty, touching and nested ones;
and the message forms of keys and ranges."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lsmkv.base.key_ranges import KeyRanges, show_key, show_range, successor

keys = st.sampled_from([b"", b"a", b"a\x00", b"b", b"c", b"d", b"e"])
ranges = st.lists(st.tuples(st.none() | keys, st.none() | keys), max_size=5)


def inside(key, rng):
    low, high = rng
    return (low is None or key >= low) and (high is None or key < high)


@settings(max_examples=200, deadline=None)
@given(given_ranges=ranges, other_ranges=ranges)
def test_key_ranges_agree_with_brute_force(given_ranges, other_ranges):
    union = KeyRanges(given_ranges)
    merged = list(union)
    for first, second in zip(merged, merged[1:]):  # disjoint, apart, ascending
        assert first[1] is not None and second[0] is not None and first[1] < second[0]
    for key in [b"", b"a", b"a\x00", b"b", b"b\x00", b"c", b"d", b"e", b"f"]:
        found = union.containing(key)
        assert (found is not None) == any(inside(key, r) for r in given_ranges)
        if found is not None:
            assert found in merged and inside(key, found)
    other = KeyRanges(other_ranges)
    pair = union.first_overlap(other)
    # Two unions overlap iff some key lies in both (every low end is a key; so is b"").
    candidates = [b""] + [low for low, _ in [*given_ranges, *other_ranges] if low is not None]
    overlapping = any(union.containing(k) is not None and other.containing(k) is not None for k in candidates)
    assert (pair is not None) == overlapping
    if pair is not None:
        assert pair[0] in merged and pair[1] in list(other)


def test_touching_ranges_merge_and_empty_ones_vanish():
    assert list(KeyRanges([(b"a", b"c"), (b"c", b"e"), (b"x", b"x"), (b"z", b"y")])) == [(b"a", b"e")]
    assert list(KeyRanges([(b"b", None), (None, b"a")])) == [(None, b"a"), (b"b", None)]
    assert list(KeyRanges([(b"b", b"c"), (None, None)])) == [(None, None)]
    assert successor(b"k") == b"k\x00" and b"k" < successor(b"k") < b"k\x00\x00" < b"l"


def test_keys_and_ranges_in_messages_are_escaped_and_shortened():
    assert show_key(b"a\nb") == "b'a\\nb'"
    assert show_key(b"x" * 100) == f"{b'x' * 40!r}... (100 bytes)"
    assert show_range(None, b"k") == "[the first key, b'k')"
    assert show_range(b"k", None) == "[b'k', past the last key)"
