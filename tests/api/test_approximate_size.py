"""db.approximate_size(start, end) on both engines: close to the bytes the
range really takes on disk, additive over adjacent ranges, cheap."""

from __future__ import annotations

import os
import random

import pytest

import btree
import lsmkv

ENGINES = {
    "lsm": lambda path: lsmkv.open(path, write_buffer_size=256 << 10, compression=None),
    "btree": lambda path: btree.open(path),
}


def _fill(db, n, rng):
    keys = sorted(rng.randbytes(16) for _ in range(n))
    for i in range(0, n, 1000):
        with db.write_batch() as b:
            for k in keys[i:i + 1000]:
                b.put(k, rng.randbytes(100))
    db.flush()
    return keys


def _disk_bytes(path, names):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if names(f))


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_estimates_are_close_additive_and_monotone(tmp_path, engine):
    rng = random.Random(3)
    path = str(tmp_path / "db")
    with ENGINES[engine](path) as db:
        keys = _fill(db, 40_000, rng)
        if engine == "lsm":
            db.compact_range()
            on_disk = _disk_bytes(path, lambda f: f.endswith(".sst"))
        else:
            db.flush()
            on_disk = _disk_bytes(path, lambda f: f == "btree.pages")
        whole = db.approximate_size()
        assert abs(whole - on_disk) <= 0.25 * on_disk, (whole, on_disk)
        # A quarter of the keys: about a quarter of the bytes.
        quarter = db.approximate_size(keys[10_000], keys[20_000])
        assert abs(quarter - whole / 4) <= 0.25 * whole / 4, (quarter, whole)
        # Adjacent ranges add up exactly; bounds may be absent keys.
        cuts = [None] + sorted(rng.sample(keys, 7) + [b"\x00", b"\xff" * 17]) + [None]
        parts = [db.approximate_size(a, b) for a, b in zip(cuts, cuts[1:])]
        assert sum(parts) == whole and all(p >= 0 for p in parts)
        assert db.approximate_size(keys[5], keys[5]) == 0
        assert db.approximate_size(keys[9], keys[3]) == 0
        assert db.approximate_size(b"\xff" * 17, None) <= 0.01 * whole + (64 << 10)
        with pytest.raises(TypeError):
            db.approximate_size("a", None)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_empty_database_holds_nothing(tmp_path, engine):
    with ENGINES[engine](str(tmp_path / "db")) as db:
        assert db.approximate_size() == 0
        assert db.approximate_size(b"a", b"b") == 0


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_adjacent_ranges_add_up_for_random_triples(tmp_path, engine):
    """approximate_size(a, b) + approximate_size(b, c) == approximate_size(a,
    c) for a <= b <= c, to the byte, on an unchanging database: cut points
    that are stored keys, absent keys and open ends."""
    rng = random.Random(11)
    with ENGINES[engine](str(tmp_path / "db")) as db:
        keys = _fill(db, 20_000, rng)
        if engine == "lsm":
            db.put(b"memtable", b"x")  # not on disk: counts nothing, changes nothing
        points = keys + [rng.randbytes(rng.randint(1, 20)) for _ in range(2_000)]
        for _ in range(300):
            a, b, c = sorted(rng.sample(points, 3))
            a = None if rng.random() < 0.1 else a
            c = None if rng.random() < 0.1 else c
            left, right, union = (db.approximate_size(a, b), db.approximate_size(b, c),
                                  db.approximate_size(a, c))
            assert left >= 0 and right >= 0
            assert left + right == union, (a, b, c, left, right, union)
        assert db.approximate_size(None, keys[7_000]) + db.approximate_size(keys[7_000], None) \
            == db.approximate_size()
