"""Measurements: latency histograms, I/O and CPU counters, disk usage, amplification.

* Latency: every operation's duration is kept raw during the phase (an
  ``array`` append, nothing more) and put into an HdrHistogram (the
  ``hdrhistogram`` package: log-bucketed, 3 significant digits, 1 ns to 1 h)
  afterwards. Percentiles are the histogram's: within 0.1% of the exact
  sample percentile.
* Write amplification: bytes the engine wrote to its files during the phase
  (see :func:`bytes_written`: /proc/self/io ``wchar`` of the process tree, or
  the engine's own counter where that is larger) divided by the user bytes
  the phase wrote (keys and values of puts, keys of deletes). The engine's
  counter and /proc/self/io ``write_bytes`` (page-cache bytes dirtied) are
  recorded beside it.
* Space amplification: bytes the database directory occupies (allocated
  size of every file, sparse holes not counted) / the logical live bytes the
  bench's own model says the database holds.
* Read amplification: from the engine's counters: blocks (or pages) read
  from its files per get.
* CPU seconds (user + system, all threads) from getrusage; peak RSS from
  /proc/self/status VmHWM, reset at the start of each phase through
  /proc/self/clear_refs where the kernel allows it.
* Page-cache residency: the share of a database's file bytes the OS page
  cache holds (``mincore`` on a mapping of each file), so that a read
  phase's time can be told apart from the disk's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import mmap
import os
import resource
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from hdrh.histogram import HdrHistogram

log = logging.getLogger(__name__)

__all__ = ["LATENCY_PERCENTILES", "new_histogram", "histogram_from_ns", "latency_summary", "latency_cdf",
           "IoCounters", "child_pids", "bytes_written",
           "read_io", "read_process_io", "timed", "cpu_seconds", "reset_peak_rss", "peak_rss_bytes",
           "directory_bytes",
           "throughput_timeline", "ratio", "engine_deltas", "phase_read_amp"]

#: Histogram range and precision (nanoseconds).
HIST_LOWEST_NS = 1
HIST_HIGHEST_NS = 3_600_000_000_000
HIST_SIGNIFICANT_DIGITS = 3
#: Relative precision of a reported percentile (3 significant digits).
HIST_RELATIVE_PRECISION = 10 ** -HIST_SIGNIFICANT_DIGITS

#: Reported percentiles: results key -> percentile.
LATENCY_PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(HIST_LOWEST_NS, HIST_HIGHEST_NS, HIST_SIGNIFICANT_DIGITS)


def histogram_from_ns(samples: Any) -> HdrHistogram:
    """An HdrHistogram of ``samples`` (nanoseconds).

    Samples are first grouped by histogram bucket with numpy (values that
    the histogram cannot tell apart are recorded once, with their count), so
    a million samples cost milliseconds instead of seconds.
    """
    hist = new_histogram()
    values = np.asarray(samples, dtype=np.int64)
    if values.size == 0:
        return hist
    values = np.clip(values, HIST_LOWEST_NS, HIST_HIGHEST_NS)
    # The histogram's buckets: exact below 2048 (2^(11)), then 1024 sub-buckets per power of two.
    magnitude = np.floor(np.log2(values)).astype(np.int64)
    one = np.int64(1)
    magnitude -= (one << magnitude) > values          # float rounding near powers of two
    magnitude += (one << (magnitude + 1)) <= values
    shift = np.maximum(magnitude - 10, 0)
    lowest_equivalent = (values >> shift) << shift
    uniq, counts = np.unique(lowest_equivalent, return_counts=True)
    for value, count in zip(uniq.tolist(), counts.tolist()):
        hist.record_value(value, count)
    return hist


def latency_summary(hist: HdrHistogram, samples_ns: Any = None) -> dict[str, float] | None:
    """Percentiles, max and mean in microseconds (None for an empty histogram).

    With the raw ``samples_ns`` the maximum and the mean are exact (the
    histogram only knows the maximum's bucket, and its mean walks every bucket
    in Python); percentiles are capped at the true maximum.
    """
    if hist.get_total_count() == 0:
        return None
    if samples_ns is not None and len(samples_ns):
        values = np.asarray(samples_ns, dtype=np.int64)
        top, mean = int(values.max()), float(values.mean())
    else:
        top, mean = hist.get_max_value(), hist.get_mean_value()
    # A percentile is the top of its bucket, which may lie above the largest sample.
    out = {key: min(hist.get_value_at_percentile(p), top) / 1000.0 for key, p in LATENCY_PERCENTILES.items()}
    out["max"] = top / 1000.0
    out["mean"] = mean / 1000.0
    return {k: round(v, 3) for k, v in out.items()}


#: Fractions at which latency_cdf samples the distribution: dense in the tail.
_CDF_FRACTIONS = np.unique(np.round(np.concatenate([
    np.linspace(0.005, 0.9, 60), 1 - np.logspace(-1, -4.5, 60)]), 6))


def latency_cdf(samples_ns: Any) -> dict[str, list[float]] | None:
    """The latency distribution as (fraction of operations, latency in µs) points,
    exact from the raw samples (for the CDF plot)."""
    values = np.asarray(samples_ns, dtype=np.int64)
    if values.size == 0:
        return None
    fractions = _CDF_FRACTIONS[_CDF_FRACTIONS < 1 - 0.5 / values.size]
    us = np.quantile(values, fractions, method="inverted_cdf") / 1000.0
    return {"fraction": [float(f) for f in fractions] + [1.0],
            "us": [round(float(u), 3) for u in us] + [round(float(values.max()) / 1000.0, 3)]}


@dataclass
class IoCounters:
    """/proc/self/io fields (bytes); ``available`` is False where the file does not exist."""

    available: bool
    read_bytes: int = 0
    write_bytes: int = 0
    cancelled_write_bytes: int = 0
    rchar: int = 0
    wchar: int = 0

    def __sub__(self, other: IoCounters) -> IoCounters:
        return IoCounters(self.available and other.available, self.read_bytes - other.read_bytes,
                          self.write_bytes - other.write_bytes,
                          self.cancelled_write_bytes - other.cancelled_write_bytes,
                          self.rchar - other.rchar, self.wchar - other.wchar)


def child_pids() -> list[int]:
    """Live descendants of this process (e.g. an engine's compaction worker), from /proc."""
    me = os.getpid()
    parents: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            parents[int(name)] = int(fields[1])
    tree, frontier = [], {me}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        tree += sorted(frontier)
    return tree


def _read_io_file(path: str) -> IoCounters:
    try:
        with open(path, encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return IoCounters(False)
    get = lambda name: int(fields.get(name, "0").strip())  # noqa: E731
    return IoCounters(True, get("read_bytes"), get("write_bytes"), get("cancelled_write_bytes"),
                      get("rchar"), get("wchar"))


def read_io() -> IoCounters:
    """I/O of this process and its live descendants.

    /proc/self/io covers every thread of this process and every child it has
    already reaped; a live child (lsmkv's compaction worker) is read from its
    own /proc/<pid>/io.
    """
    total = _read_io_file("/proc/self/io")
    if not total.available:
        return total
    for pid in child_pids():
        child = _read_io_file(f"/proc/{pid}/io")
        if child.available:
            total.read_bytes += child.read_bytes
            total.write_bytes += child.write_bytes
            total.cancelled_write_bytes += child.cancelled_write_bytes
            total.rchar += child.rchar
            total.wchar += child.wchar
    return total


def read_process_io() -> IoCounters:
    """I/O of this process alone (all its threads and reaped children), not
    of its live descendants: /proc/self/io."""
    return _read_io_file("/proc/self/io")


def timed(fn: Callable[[], Any], disable_gc: bool = False) -> float:
    """Seconds ``fn()`` takes, after a ``gc.collect()``; with ``disable_gc``
    the collector is off while it runs."""
    gc.collect()
    if disable_gc:
        gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        if disable_gc:
            gc.enable()


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds() -> float:
    """User + system CPU time so far of this process (all threads), of its reaped
    children, and of its live descendants."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    for pid in child_pids():
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return total


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) of this process and its live
    descendants; False where that is not possible."""
    ok = True
    for pid in ["self"] + [str(p) for p in child_pids()]:
        try:
            with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
        except OSError:
            ok = ok and pid != "self"
    return ok


def _hwm(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """Peak resident set size since the last reset: this process's, plus that of
    each live descendant (each peak on its own, so the sum can exceed any moment's total)."""
    own = _hwm("self")
    if own is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return own + sum(_hwm(str(p)) or 0 for p in child_pids())


def directory_bytes(path: str) -> int:
    """Bytes the files under ``path`` occupy: each file's size, or its allocated
    blocks if fewer (a sparse file's holes take no space)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                continue  # removed while we walked (a compaction finishing)
            total += min(st.st_size, st.st_blocks * 512)
    return total


_libc = None


def _mincore():
    """libc's mincore, or None where it cannot be called."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
            _libc.mincore.restype = ctypes.c_int
        except (OSError, AttributeError):
            _libc = False
    return _libc.mincore if _libc else None


def page_cache_residency(path: str) -> float | None:
    """The share (0..1) of the bytes of the files under ``path`` that the OS
    page cache holds now, or None where that cannot be asked (no mincore).
    Each file is mapped privately and read-only in effect (nothing is
    touched, so nothing is faulted in) and asked page by page."""
    mincore = _mincore()
    if mincore is None:
        return None
    page = mmap.PAGESIZE
    resident = total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                with open(os.path.join(root, name), "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if not size:
                        continue
                    with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as m:
                        pages = (size + page - 1) // page
                        vec = (ctypes.c_ubyte * pages)()
                        anchor = ctypes.c_char.from_buffer(m)
                        try:
                            if mincore(ctypes.addressof(anchor), size, vec) != 0:
                                return None
                        finally:
                            del anchor  # (the mapping cannot close while exported)
            except (FileNotFoundError, ValueError):
                continue  # removed meanwhile, or a file that cannot be mapped
            resident += sum(b & 1 for b in vec) * page
            total += pages * page
    return resident / total if total else None


def throughput_timeline(ends_ns: Any, elapsed_ns: int, target_points: int = 60,
                        min_interval_s: float = 0.02) -> dict[str, Any]:
    """Operations per second in consecutive intervals of the phase.

    ``ends_ns``: each operation's completion time since the phase started.
    The interval is chosen to give about ``target_points`` points.
    """
    ends = np.asarray(ends_ns, dtype=np.int64)
    elapsed_s = max(elapsed_ns, 1) / 1e9
    interval = max(min_interval_s, elapsed_s / target_points)
    bins = max(1, int(np.ceil(elapsed_s / interval)))
    counts = np.bincount(np.minimum((ends / 1e9 / interval).astype(np.int64), bins - 1), minlength=bins)
    rates = counts / interval
    # The last interval is usually partial: scale by its real length.
    last_len = elapsed_s - (bins - 1) * interval
    if bins > 1 and last_len > 0:
        rates[-1] = counts[-1] / last_len
    return {"interval_s": interval, "ops_per_sec": [round(float(r), 1) for r in rates]}


def bytes_written(io: IoCounters, engine_written: float | None) -> tuple[float | None, str | None]:
    """What an engine wrote to its files during a phase, and where the figure comes from.

    The base is ``wchar`` of /proc/self/io (and of live helper processes):
    bytes passed to write()/pwrite() by the process tree, exactly what an
    engine that writes with system calls wrote. It misses writes through a
    memory-mapped file, which an engine's own counter sees; both are lower
    bounds of the truth, so the larger one is taken. (``write_bytes``, the
    page-cache bytes dirtied, is not used: on kernels with large folios it
    counts a whole folio, up to hundreds of KiB, for a 4 KiB write into a
    cached file.)
    """
    if not io.available:
        return (engine_written, "engine counter") if engine_written is not None else (None, None)
    if engine_written is not None and engine_written > io.wchar:
        return engine_written, "engine counter (above the system-call count: writes through mmap)"
    return io.wchar, "/proc/self/io wchar"


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def engine_deltas(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """after - before for every numeric counter present in both."""
    out = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                isinstance(old, (int, float)) and not isinstance(old, bool):
            out[key] = value - old
    return out


def phase_read_amp(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """Blocks/pages read from files per get during the phase, from the engine's counters.

    Uses a ``blocks_read`` (or ``pages_read``) counter when the engine has
    one; otherwise the cumulative ``read_amp`` ratio and ``gets`` count.
    """
    gets = _num(after, "gets") - _num(before, "gets")
    if gets <= 0:
        return None
    for counter in ("blocks_read", "pages_read"):
        if counter in after:
            return (_num(after, counter) - _num(before, counter)) / gets
    if "read_amp" in after:
        blocks_after = _num(after, "read_amp") * _num(after, "gets")
        blocks_before = _num(before, "read_amp") * _num(before, "gets")
        return max(0.0, blocks_after - blocks_before) / gets
    return None


def _num(d: dict[str, Any], key: str) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
