"""db_bench phases and the data they use: keys, values, the dataset model, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from bench.config import BenchConfig, ConfigError, parse_option, parse_size, parse_workloads
from bench.data import DbBenchKeys, ValuePool, YcsbKeys, compression_ratio
from bench.workloads import DELETE, READ, SEEK, WRITE, Dataset, DbBenchWorkload, make_workloads


def drain(stream):
    chunks = []
    while (c := stream.next_chunk()) is not None:
        chunks.append(c)
    return chunks


def run_phase(name, cfg, ds, seed=1, ops=None):
    w = DbBenchWorkload(name, cfg, ops)
    if w.fresh:
        ds.reset(w.keyspace(), name)
    chunks = drain(w.stream(ds, np.random.default_rng(seed), ValuePool(seed), w.operations))
    for c in chunks:
        ds.apply(c)
    return w, chunks


def flat(chunks, attr):
    out = []
    for c in chunks:
        v = getattr(c, attr)
        out += v.tolist() if isinstance(v, np.ndarray) else list(v)
    return out


def test_keys_are_fixed_width_and_ordered():
    ks = DbBenchKeys(16)
    keys = ks.keys(np.array([0, 7, 123456]))
    assert keys == [b"0000000000000000", b"0000000000000007", b"0000000000123456"]
    missing = ks.missing_keys(np.array([7]))[0]
    assert keys[1] < missing < ks.key(8)
    y = YcsbKeys(hashed=False, zeropadding=8)
    assert y.key(5) == b"user00000005"
    assert YcsbKeys(hashed=True).key(5).startswith(b"user") and YcsbKeys(hashed=True).key(5) != b"user5"


@pytest.mark.parametrize("c", [0.0, 0.5, 0.8])
def test_value_compressibility(c):
    values = ValuePool(3, c).take([100] * 5000)
    assert all(len(v) == 100 for v in values)
    assert compression_ratio(values) == pytest.approx(1 - c, abs=0.08)


def test_value_pool_is_seeded():
    assert ValuePool(1).take([50] * 10) == ValuePool(1).take([50] * 10)
    assert ValuePool(1).take([50] * 10) != ValuePool(2).take([50] * 10)


def test_fills_write_every_record_once():
    cfg = BenchConfig(records=5000, operations=1000)
    ds = Dataset()
    _, chunks = run_phase("fillseq", cfg, ds)
    assert flat(chunks, "nums") == list(range(5000))
    keys = flat(chunks, "keys")
    assert keys == sorted(keys)
    ds2 = Dataset()
    _, chunks = run_phase("fillrandom", cfg, ds2)
    nums = flat(chunks, "nums")
    assert sorted(nums) == list(range(5000)) and nums != list(range(5000))
    assert set(flat(chunks, "kinds")) == {WRITE}
    assert ds2.live_count == 5000
    assert ds2.live_bytes() == 5000 * (16 + 100)


def test_reads_deletes_and_seeks():
    cfg = BenchConfig(records=2000, operations=1000, scan_length=7)
    ds = Dataset()
    run_phase("fillrandom", cfg, ds)
    _, chunks = run_phase("readrandom", cfg, ds)
    assert len(flat(chunks, "kinds")) == 1000 and set(flat(chunks, "kinds")) == {READ}
    assert max(flat(chunks, "nums")) < 2000
    _, chunks = run_phase("readmissing", cfg, ds)
    assert all(k.endswith(b".") for k in flat(chunks, "keys"))
    w, chunks = run_phase("seekrandom", cfg, ds)
    assert w.operations == 100 and set(flat(chunks, "args")) == {7} and set(flat(chunks, "kinds")) == {SEEK}
    _, chunks = run_phase("deleterandom", cfg, ds)
    nums = flat(chunks, "nums")
    assert set(flat(chunks, "kinds")) == {DELETE}
    assert len(nums) == len(set(nums)) == 1000  # at most half of the 2,000 live records
    assert ds.live_count == 1000 and ds.deleted == 1000
    # Reads after deletes only pick live records.
    _, chunks = run_phase("readrandom", cfg, ds, seed=9)
    assert not set(flat(chunks, "nums")) & set(nums)


def test_same_seed_same_operations():
    cfg = BenchConfig(records=1000, operations=500)
    a, b = Dataset(), Dataset()
    run_phase("fillrandom", cfg, a)
    run_phase("fillrandom", cfg, b)
    _, ca = run_phase("overwrite", cfg, a, seed=4)
    _, cb = run_phase("overwrite", cfg, b, seed=4)
    assert flat(ca, "keys") == flat(cb, "keys") and flat(ca, "args") == flat(cb, "args")


def test_config_parsing():
    assert parse_size("8MiB") == 8 << 20 and parse_size("64k") == 64 << 10 and parse_size("1.5G") == 3 << 29
    assert parse_size("4096") == 4096
    with pytest.raises(ConfigError):
        parse_size("lots")
    assert parse_option("write_buffer_size=1_048_576") == ("write_buffer_size", 1048576)
    assert parse_option("compression=none") == ("compression", None)
    assert parse_option("verify_checksums=false") == ("verify_checksums", False)
    assert parse_option("ratio=0.5") == ("ratio", 0.5)
    assert parse_option("codec=zstd") == ("codec", "zstd")
    with pytest.raises(ConfigError):
        parse_option("novalue")
    assert [str(w) for w in parse_workloads("fillrandom, readrandom:500")] == ["fillrandom", "readrandom:500"]
    with pytest.raises(ConfigError, match="unknown workload 'bogus'"):
        make_workloads(BenchConfig(workloads=parse_workloads("bogus")))
