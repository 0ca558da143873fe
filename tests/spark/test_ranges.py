"""Key ranges and filter translation (lsmkv/spark/ranges.py, filters.py),
checked against brute force over many keys: a pushed filter must select
exactly the keys the filter selects. No Spark needed (the Filter classes
come from pyspark's module, skipped without it)."""

from __future__ import annotations

import random

import pytest

from lsmkv.spark.filters import key_ranges
from lsmkv.spark.ranges import ALL, intersect, normalize, prefix_end, split

ds = pytest.importorskip("pyspark.sql.datasource")


def _in(ranges, key):
    return any((lo is None or key >= lo) and (hi is None or key < hi) for lo, hi in ranges)


def _keys(rng, n=400):
    alphabet = [b"", b"\x00", b"a", b"ab", b"b", b"\xff", b"\xff\xff", b"z"]
    return sorted({b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3))) for _ in range(n)})


def test_prefix_end():
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") is None
    assert prefix_end(b"") is None


def test_normalize_and_intersect():
    assert normalize([(b"c", b"d"), (b"a", b"c"), (b"x", None), (b"y", b"z")]) == [(b"a", b"d"), (b"x", None)]
    assert intersect(ALL, [(b"a", b"b")]) == [(b"a", b"b")]
    assert intersect([(b"a", b"c")], [(b"b", b"d")]) == [(b"b", b"c")]
    assert intersect([(b"a", b"b")], [(b"b", b"c")]) == []


@pytest.mark.parametrize("seed", range(5))
def test_binary_filters_select_exactly_the_matching_keys(seed):
    rng = random.Random(seed)
    keys = _keys(rng)
    for _ in range(200):
        picks = [rng.choice(keys) for _ in range(3)]
        f = rng.choice([
            (ds.EqualTo(("key",), picks[0]), lambda k: k == picks[0]),
            (ds.In(("key",), tuple(picks)), lambda k: k in picks),
            (ds.GreaterThan(("key",), picks[0]), lambda k: k > picks[0]),
            (ds.GreaterThanOrEqual(("key",), picks[0]), lambda k: k >= picks[0]),
            (ds.LessThan(("key",), picks[1]), lambda k: k < picks[1]),
            (ds.LessThanOrEqual(("key",), picks[1]), lambda k: k <= picks[1]),
        ])
        g = (ds.GreaterThanOrEqual(("key",), picks[2]), lambda k: k >= picks[2])
        filters = [f, g] if rng.random() < 0.5 else [f]
        ranges, rest = key_ranges([x for x, _ in filters], None)
        assert rest == []
        for k in keys:
            assert _in(ranges, k) == all(pred(k) for _, pred in filters), (filters, k)


def test_string_filters_and_what_goes_back_to_spark():
    value_filter = ds.EqualTo(("value",), "x")
    not_filter = ds.Not(ds.EqualTo(("key",), "x"))
    ends = ds.StringEndsWith(("key",), "x")
    starts = ds.StringStartsWith(("key",), "ké")
    ranges, rest = key_ranges([value_filter, not_filter, ends, starts], "utf-8")
    assert rest == [value_filter, not_filter, ends]
    assert ranges == [("ké".encode(), prefix_end("ké".encode()))]
    # A range on a charset whose byte order is not the strings' order goes back to Spark.
    gt = ds.GreaterThan(("key",), "a")
    eq = ds.EqualTo(("key",), "a")
    ranges, rest = key_ranges([gt, eq], "utf-16-le")
    assert rest == [gt] and ranges == [("a".encode("utf-16-le"), "a".encode("utf-16-le") + b"\x00")]
    # Keys are never null.
    assert key_ranges([ds.IsNotNull(("key",))], None) == (ALL, [])
    assert key_ranges([ds.IsNull(("key",))], None) == ([], [])


def test_split_puts_a_point_in_one_slot():
    cuts = [b"b", b"d", b"f"]
    assert split([(b"c", b"c\x00")], cuts) == [[(b"c", b"c\x00")]]
    assert split(ALL, cuts) == [[(None, b"b")], [(b"b", b"d")], [(b"d", b"f")], [(b"f", None)]]
    assert split([(b"a", b"a\x00"), (b"e", b"e\x00")], cuts) == [[(b"a", b"a\x00")], [(b"e", b"e\x00")]]
