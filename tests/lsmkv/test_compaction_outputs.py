"""Where a compaction cuts its outputs (compaction_job._OutputWriter): at
target_file_size, at the grandparent overlap limit, and, past half the
target size, where a grandparent table ends."""

from __future__ import annotations

import os

from lsmkv.base.fs import DEFAULT_FS
from lsmkv.lsm.compaction_job import CompactionJob, TableOptions, run_compaction
from lsmkv.lsm.table.builder import TableBuilder
from lsmkv.lsm.write_batch import VALUE

VALUE_BYTES = os.urandom(100)  # incompressible: stored size follows raw size
TABLE = TableOptions(block_size=1024, compression=None, compression_level=3, upper_compression_level=-1,
                     bloom_bits_per_key=10)


def key(i: int) -> bytes:
    return b"k%06d" % i


def write_input(path, n):
    f = DEFAULT_FS.create(str(path))
    b = TableBuilder(f, block_size=1024, compression=None)
    for i in range(n):
        b.add(key(i), 1_000_000 - i, VALUE, VALUE_BYTES)
    b.finish()
    f.sync()
    f.close()


def compact(tmp_path, n, target, grandparents, overlap_limit):
    src = tmp_path / "000001.sst"
    write_input(src, n)
    job = CompactionJob(dbpath=str(tmp_path), job_id="t", sources=[[(str(src), 1, 0)]], output_level=1,
                        snapshots=[], lower_ranges=[[(key(0), key(n))]], grandparents=grandparents,
                        target_file_size=target, max_grandparent_overlap_bytes=overlap_limit, table=TABLE)
    result = run_compaction(job)
    for out in result.outputs:
        os.remove(out.tmp_path)
    return result.outputs


def test_without_grandparents_outputs_are_cut_at_the_target_size(tmp_path):
    outputs = compact(tmp_path, 2000, 40_000, [], 1 << 40)
    assert len(outputs) >= 5
    # Until an output has written a few blocks its stored size is estimated
    # from raw key and value bytes, which undercounts per-entry overhead.
    assert all(0.8 * 40_000 <= out.size <= 1.3 * 40_000 for out in outputs[:-1])
    assert all(a.largest < b.smallest for a, b in zip(outputs, outputs[1:]))
    assert sum(out.entries for out in outputs) == 2000


def test_past_half_the_target_an_output_ends_where_a_grandparent_ends(tmp_path):
    # Grandparents end every 100 keys. Cut by size alone, outputs hold 374 keys
    # (the test above) and end between grandparent ends.
    ends = [key(i) for i in range(99, 2000, 100)]
    outputs = compact(tmp_path, 2000, 40_000, [(end, 1000) for end in ends], 1 << 40)
    assert all(out.largest in ends for out in outputs[:-1])
    # Not at the first end (100 keys, a quarter of the target), but at the
    # first end past half of it (50%, +5% per end passed).
    assert {out.entries for out in outputs[:-1]} <= {200, 300}
    assert sum(out.entries for out in outputs) == 2000


def test_the_grandparent_overlap_limit_still_cuts_small_outputs(tmp_path):
    ends = [key(i) for i in range(9, 2000, 10)]
    outputs = compact(tmp_path, 2000, 1 << 30, [(end, 10_000) for end in ends], 35_000)
    # Each output may overlap at most 35,000 bytes of grandparents: 3 tables of
    # 10,000 (the fourth would pass the limit), i.e. 40 keys with the first.
    assert len(outputs) > 10
    assert all(out.largest in ends for out in outputs[:-1])
    assert max(out.entries for out in outputs) <= 40
