"""Key distributions: zipfian skew against theory, YCSB's scrambling, latest, hotspot, uniform."""

from __future__ import annotations

import numpy as np
import pytest

from bench import distributions as dist

N = 400_000  # draws per test; the tolerances below are several standard errors wide


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_fnv1a_matches_published_vectors():
    # Test vectors of the FNV-1a 64-bit reference.
    assert dist.fnv1a_64(b"") == 0xCBF29CE484222325
    assert dist.fnv1a_64(b"a") == 0xAF63DC4C8601EC8C
    assert dist.fnv1a_64(b"foobar") == 0x85944171F73967E8


def test_vectorized_fnvhash64_equals_scalar():
    values = np.array([0, 1, 2, 255, 256, 12345, 2**31 - 1, 2**40 + 7, 2**62], dtype=np.int64)
    assert dist.fnvhash64_array(values).tolist() == [dist.fnvhash64(int(v)) for v in values]
    assert (dist.fnvhash64_array(np.arange(10_000)) >= 0).all()


def test_zeta_exact_and_extrapolated():
    assert dist.zeta(1, 0.99) == 1.0
    assert dist.zeta(3, 0.5) == pytest.approx(1 + 2 ** -0.5 + 3 ** -0.5)
    # YCSB's precomputed zeta(10^10, 0.99).
    assert dist.zeta(10_000_000_000, 0.99) == pytest.approx(26.46902820178302, rel=1e-9)


@pytest.mark.parametrize("n,theta", [(1000, 0.99), (10_000, 0.8)])
def test_zipfian_head_matches_theory(n, theta):
    z = dist.Zipfian(n, theta)
    draws = z.sample(rng(), N)
    assert draws.min() >= 0 and draws.max() < n
    counts = np.bincount(draws, minlength=n) / N
    zetan = dist.zeta(n, theta)
    # The method gives items 0 and 1 exactly their zipfian probability.
    p0, p1 = 1 / zetan, 0.5 ** theta / zetan
    assert counts[0] == pytest.approx(p0, abs=4 * np.sqrt(p0 * (1 - p0) / N))
    assert counts[1] == pytest.approx(p1, abs=4 * np.sqrt(p1 * (1 - p1) / N))
    assert counts.argmax() == 0
    # Popularity falls with rank: the first 1% of items get far more than 1% of draws.
    head = counts[: n // 100].sum()
    expected_head = dist.zeta(n // 100, theta) / zetan
    assert head == pytest.approx(expected_head, rel=0.15)


def test_zipfian_growing_item_count():
    z = dist.Zipfian(100)
    limit = np.full(N, 999)  # 1000 items now
    draws = z.sample(rng(), N, limit=limit)
    assert draws.max() <= 999 and draws.max() > 500
    assert (draws == 0).mean() == pytest.approx(1 / dist.zeta(1000, 0.99), abs=0.005)


def test_scrambled_zipfian_top_share_and_scatter():
    n = 10_000
    z = dist.ScrambledZipfian(0, n - 1)
    draws = z.sample(rng(), N)
    assert draws.min() >= 0 and draws.max() < n
    counts = np.bincount(draws, minlength=n) / N
    # The hottest item is zipf item 0 of 10^10 hashed: share >= 1/zeta(10^10) (~3.78%),
    # plus the rare zipf items that hash onto the same record.
    share = counts.max()
    assert 1 / 26.469 * 0.95 <= share <= 1 / 26.469 * 1.15
    assert counts.argmax() == dist.fnvhash64(0) % n
    # Hot items are scattered, not clustered at the start of the range.
    top = np.argsort(counts)[::-1][:20]
    assert top.max() > n // 2


def test_scrambled_zipfian_never_returns_uninserted_records():
    z = dist.ScrambledZipfian(0, 1999)
    limit = np.full(50_000, 999)
    assert z.sample(rng(), 50_000, limit=limit).max() <= 999


def test_latest_favours_recent_inserts():
    newest = 9_999
    latest = dist.SkewedLatest(newest)
    draws = latest.sample(rng(), N, limit=np.full(N, newest))
    assert draws.max() <= newest and draws.min() >= 0
    counts = np.bincount(draws, minlength=newest + 1)
    # The newest record is the most popular, with the zipfian head probability.
    assert counts.argmax() == newest
    assert counts[newest] / N == pytest.approx(1 / dist.zeta(newest, 0.99), abs=0.005)
    # The most recent 1% of records get far more than 1% of the draws.
    assert (draws > newest - 100).mean() > 0.25
    # And the popularity moves with inserts: with a newer limit, the newest is the new one.
    moved = latest.sample(rng(1), N, limit=np.full(N, newest + 500))
    assert np.bincount(moved).argmax() == newest + 500


def test_uniform_covers_range_evenly():
    u = dist.Uniform(100, 1099)
    draws = u.sample(rng(), N)
    assert draws.min() == 100 and draws.max() == 1099
    counts = np.bincount(draws - 100, minlength=1000)
    assert (counts > 0).all()
    expected = N / 1000
    # Every count within 6 standard deviations of the mean; chi-square near its mean (999).
    assert np.abs(counts - expected).max() < 6 * np.sqrt(expected)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert 800 < chi2 < 1200


def test_hotspot_sends_the_hot_fraction_to_the_hot_set():
    h = dist.Hotspot(0, 9_999, hot_set_fraction=0.2, hot_op_fraction=0.8)
    draws = h.sample(rng(), N)
    assert draws.min() >= 0 and draws.max() <= 9_999
    assert (draws < 2_000).mean() == pytest.approx(0.8, abs=0.01)


def test_sequential_wraps():
    s = dist.Sequential(5, 7)
    assert s.sample(rng(), 5).tolist() == [5, 6, 7, 5, 6]
    assert s.sample(rng(), 2).tolist() == [7, 5]


def test_exponential_stays_below_limit_and_is_recent():
    e = dist.Exponential(95, 1000)
    draws = e.sample(rng(), N, limit=np.full(N, 50_000))
    assert draws.max() <= 50_000 and draws.min() >= 0
    assert (draws > 49_000).mean() == pytest.approx(0.95, abs=0.01)


def test_same_seed_same_draws():
    z1 = dist.ScrambledZipfian(0, 999).sample(rng(3), 1000)
    z2 = dist.ScrambledZipfian(0, 999).sample(rng(3), 1000)
    assert (z1 == z2).all()
