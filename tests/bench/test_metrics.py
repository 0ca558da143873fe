"""Measurement helpers: bytes written, process-tree I/O, disk usage, read amplification."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench import metrics
from bench.metrics import IoCounters


def test_bytes_written_prefers_the_larger_lower_bound():
    io = IoCounters(True, write_bytes=10_000_000, wchar=1_000)
    # An engine writing through mmap: its own counter sees more than the system calls.
    assert metrics.bytes_written(io, 5_000) == (5_000, "engine counter (above the system-call count: "
                                                       "writes through mmap)")
    # Otherwise the system-call count; write_bytes (dirtied page-cache bytes) is never used.
    assert metrics.bytes_written(io, 500)[0] == 1_000
    assert metrics.bytes_written(io, None) == (1_000, "/proc/self/io wchar")
    assert metrics.bytes_written(IoCounters(False), 42) == (42, "engine counter")
    assert metrics.bytes_written(IoCounters(False), None) == (None, None)


@pytest.mark.subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io")
def test_io_counts_a_live_child_process(tmp_path):
    target = tmp_path / "child.bin"
    code = ("import sys, time\n"
            f"f = open({str(target)!r}, 'wb'); f.write(b'x' * 3_000_000); f.flush()\n"
            "sys.stdout.write('ok\\n'); sys.stdout.flush(); time.sleep(30)\n")
    before = metrics.read_io()
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ok\n"
        assert child.pid in metrics.child_pids()
        assert (metrics.read_io() - before).wchar >= 3_000_000
    finally:
        child.kill()
        child.wait()


def test_directory_bytes_counts_files_and_not_holes(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 10_000)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "b").write_bytes(b"y" * 5_000)
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(100 << 20)  # 100 MiB of hole
    total = metrics.directory_bytes(str(tmp_path))
    assert 15_000 <= total < 1 << 20


def test_phase_read_amp_from_counters():
    before = {"gets": 100, "read_amp": 0.5}
    after = {"gets": 300, "read_amp": 1.0}   # 50 blocks before, 300 after: 250 for 200 gets
    assert metrics.phase_read_amp(before, after) == pytest.approx(1.25)
    assert metrics.phase_read_amp({"gets": 0, "blocks_read": 0}, {"gets": 10, "blocks_read": 4}) == 0.4
    assert metrics.phase_read_amp({}, {"gets": 0}) is None
    assert metrics.phase_read_amp({}, {"engine": "x"}) is None


def test_engine_deltas_only_numbers():
    d = metrics.engine_deltas({"a": 1, "b": "x", "c": True, "d": [1]}, {"a": 4, "b": "y", "c": False, "d": [2]})
    assert d == {"a": 3}


def test_cpu_and_rss_are_positive():
    assert metrics.cpu_seconds() > 0
    metrics.reset_peak_rss()
    assert metrics.peak_rss_bytes() > 1 << 20


def test_page_cache_residency_sees_a_file_leave_and_enter_the_cache(tmp_path):
    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise to drop a file from the cache")
    path = tmp_path / "data"
    page = 4096
    with open(path, "wb") as f:
        f.write(os.urandom(256 * page))
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        dropped = metrics.page_cache_residency(str(tmp_path))
        if dropped is None:
            pytest.skip("mincore cannot be called here")
        if dropped > 0.5:
            pytest.skip("this file system keeps files in memory (tmpfs): nothing to drop")
        os.pread(fd, 256 * page, 0)
        assert metrics.page_cache_residency(str(tmp_path)) == 1.0
    finally:
        os.close(fd)
    (tmp_path / "empty").write_bytes(b"")  # an empty file counts for nothing
    assert metrics.page_cache_residency(str(tmp_path)) == 1.0
    assert metrics.page_cache_residency(str(tmp_path / "none")) is None
