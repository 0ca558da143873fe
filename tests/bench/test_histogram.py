"""Latency histogram: percentiles against exact ones from the raw samples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench import metrics


def exact_at_rank(sorted_samples: np.ndarray, percentile: float) -> int:
    """The sample at the rank HdrHistogram uses: round(p/100 * n), at least 1."""
    n = len(sorted_samples)
    rank = max(1, int(percentile / 100.0 * n + 0.5))
    return int(sorted_samples[rank - 1])


@pytest.mark.parametrize("seed,shape", [(1, "lognormal"), (2, "bimodal"), (3, "uniform")])
def test_percentiles_within_histogram_precision(seed, shape):
    rng = np.random.default_rng(seed)
    n = 100_000
    if shape == "lognormal":
        samples = rng.lognormal(mean=10, sigma=1.5, size=n)
    elif shape == "bimodal":
        samples = np.concatenate([rng.normal(5_000, 300, n - 2_000), rng.normal(2_000_000, 1e5, 2_000)])
    else:
        samples = rng.uniform(1, 5_000_000, size=n)
    samples = np.maximum(samples.astype(np.int64), 1)
    hist = metrics.histogram_from_ns(samples)
    assert hist.get_total_count() == n
    ordered = np.sort(samples)
    for p in (50, 90, 95, 99, 99.9, 99.99):
        exact = exact_at_rank(ordered, p)
        got = hist.get_value_at_percentile(p)
        # The histogram reports the top of the bucket holding the exact sample:
        # never below it, and at most 0.1% (3 significant digits) above it.
        assert exact <= got <= exact * (1 + metrics.HIST_RELATIVE_PRECISION) + 1, (p, exact, got)
    summary = metrics.latency_summary(hist, samples)
    assert summary["max"] == samples.max() / 1000.0
    assert summary["mean"] == pytest.approx(samples.mean() / 1000.0, rel=1e-3)
    # Without the raw samples, the histogram's own mean is within its precision.
    assert metrics.latency_summary(hist)["mean"] == pytest.approx(samples.mean() / 1000.0, rel=1e-3)
    assert summary["p50"] <= summary["p95"] <= summary["p99"] <= summary["p999"] <= summary["max"]


@pytest.mark.slow
def test_bulk_recording_equals_one_by_one():
    rng = np.random.default_rng(9)
    samples = np.maximum(rng.lognormal(9, 2, 5_000).astype(np.int64), 1)
    bulk = metrics.histogram_from_ns(samples)
    single = metrics.new_histogram()
    for v in samples.tolist():
        single.record_value(v)
    for p in np.linspace(0, 100, 201):
        assert bulk.get_value_at_percentile(p) == single.get_value_at_percentile(p)
    # Values around powers of two land in the right bucket too.
    edges = np.array([2**k + d for k in range(11, 40) for d in (-1, 0, 1)], dtype=np.int64)
    b2, s2 = metrics.histogram_from_ns(edges), metrics.new_histogram()
    for v in edges.tolist():
        s2.record_value(v)
    assert [b2.get_value_at_percentile(p) for p in range(1, 101)] == \
        [s2.get_value_at_percentile(p) for p in range(1, 101)]


def test_small_values_are_exact():
    samples = np.arange(1, 2001)
    hist = metrics.histogram_from_ns(samples)
    assert hist.get_value_at_percentile(50) == 1000
    assert math.isclose(metrics.latency_summary(hist)["p50"], 1.0)


def test_empty_histogram_has_no_summary():
    assert metrics.latency_summary(metrics.histogram_from_ns([])) is None


def test_throughput_timeline_counts_every_operation():
    ends = np.arange(0, 2_000_000_000, 1_000_000)  # 2000 ops, one per ms, over 2 s
    tl = metrics.throughput_timeline(ends, 2_000_000_000)
    rates = np.array(tl["ops_per_sec"])
    assert tl["interval_s"] == pytest.approx(2 / 60)  # about 60 points
    assert len(rates) == 60
    assert rates.sum() * tl["interval_s"] == pytest.approx(2000)
    assert rates.mean() == pytest.approx(1000, rel=0.01)
