"""The merge of several sources' chunks (cursor._live_merged) agrees with
a reference built from dicts: for a key in several sources the newest
source's version, tombstones dropped, keys below the bound, ascending and
descending, whatever the chunk boundaries."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lsmkv.cursor import _live_merged
from lsmkv.write_batch import TOMBSTONE, VALUE

keys_strategy = st.binary(min_size=0, max_size=3)


@st.composite
def sources(draw):
    """Sources, newest first: each a sorted set of keys with a kind and a
    value, cut into chunks at random places."""
    out = []
    for n in range(draw(st.integers(1, 5))):
        keys = sorted(set(draw(st.lists(keys_strategy, max_size=30))))
        entries = [(k, draw(st.sampled_from([VALUE, VALUE, TOMBSTONE])), b"%d:" % n + k) for k in keys]
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(entries))), max_size=5))))
        chunks, at = [], 0  # never an empty chunk: a source's stream ends instead
        for cut in [c for c in cuts if c < len(entries)] + [len(entries)]:
            if cut > at:
                part = entries[at:cut]
                chunks.append(([k for k, _, _ in part], [kind for _, kind, _ in part],
                               [v for _, _, v in part]))
                at = cut
        out.append(chunks)
    return out


def reference(srcs, bound, reverse):
    newest: dict[bytes, tuple[int, bytes]] = {}
    for chunks in reversed(srcs):  # oldest first: newer sources overwrite
        for keys, kinds, values in chunks:
            for k, kind, v in zip(keys, kinds, values):
                newest[k] = (kind, v)
    live = [(k, v) for k, (kind, v) in sorted(newest.items()) if kind != TOMBSTONE]
    if bound is not None:
        live = [(k, v) for k, v in live if (k >= bound if reverse else k < bound)]
    return live[::-1] if reverse else live


@settings(max_examples=400, deadline=None)
@given(sources(), st.none() | keys_strategy, st.booleans())
def test_merged_sources_agree_with_a_dict_merge(srcs, bound, reverse):
    streams = []
    for chunks in srcs:
        if reverse:
            chunks = chunks[::-1]  # backward streams give the highest chunk first (each ascending)
        streams.append(iter(chunks))
    got = list(_live_merged(streams, bound, reverse, lambda: None, [True], None))
    assert got == reference(srcs, bound, reverse)
