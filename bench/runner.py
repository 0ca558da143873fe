"""The runner: executes every phase on every engine and measures it.

For each engine, in the order given, the runner opens a database in its own
directory, runs the phases in order on it (fills start from an empty
database; reading phases load data first if there is none; YCSB workloads
load their own records), and closes and deletes it. All engines run in this
one process, one after another, with the same seeded operation sequence.

A phase is:

1. an untimed load, if the phase needs one (YCSB's load phase; batches of
   1,024 puts without sync, then ``flush()``);
2. an untimed warm-up of reads drawn from the phase's own key distribution
   (phases that read; see ``BenchConfig.warmup_ops``);
3. the timed window: the operations, each timed on its own; with
   ``--threads N``, N threads take chunks of 1,024 operations from the shared
   sequence; with ``--rate``, operation *i* is due at ``start + i/rate`` and
   its latency is measured from that due time (so a stall that delays later
   operations shows up in their latency: no coordinated omission), the
   service time being recorded separately; with ``--duration``, the window
   closes after that many seconds (checked between chunks);
4. ``flush()``, untimed but inside the I/O and CPU accounting, so that
   write amplification covers everything the phase asked the engine to
   persist; then, after a phase that wrote, a wait until the engine is idle
   (:func:`_settle`), so that the compactions it caused count in it too.

The runner never prints: it reports progress through a :class:`Progress`
object and returns plain data (:class:`EngineRun`), which results.py writes.
"""

from __future__ import annotations

import base64
import gc
import logging
import shutil
import threading
import time
import zlib
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import metrics
from .config import BenchConfig
from .data import ValuePool
from .engines import EngineAdapter, EngineSettings, get_adapter
from .results import json_safe
from .workloads import (CHUNK_SIZE, DELETE, INSERT, NEXT, OP_NAMES, READ, RMW, SCAN, SEEK, UPDATE, WRITE,
                        Chunk, Dataset, FullScanWorkload, LoadPlan, Workload, YcsbWorkload)

log = logging.getLogger(__name__)

__all__ = ["Progress", "EngineRun", "Runner"]

#: Pre-generate a phase's operations when they take less memory than this.
PREGENERATE_LIMIT_BYTES = 768 << 20


#: After a phase's flush(), the engine counts as idle once it has written nothing and used
#: under IDLE_CPU_SHARE of a core for IDLE_WINDOW_S; the wait ends after SETTLE_LIMIT_S anyway.
IDLE_WINDOW_S = 0.3
IDLE_CPU_SHARE = 0.1
SETTLE_LIMIT_S = 30.0
_IDLE_POLL_S = 0.1


def _settle() -> float:
    """Wait until the engine's background work (compactions, write-back of its own)
    is done, so that a phase's I/O and CPU include the work it caused; returns the wait."""
    start = time.perf_counter()
    io, cpu, since = metrics.read_io().write_bytes, metrics.cpu_seconds(), start
    while True:
        time.sleep(_IDLE_POLL_S)
        now = time.perf_counter()
        io2, cpu2 = metrics.read_io().write_bytes, metrics.cpu_seconds()
        if io2 != io or cpu2 - cpu > IDLE_CPU_SHARE * (now - since):
            io, cpu, since = io2, cpu2, now
        elif now - since >= IDLE_WINDOW_S:
            return now - start - (now - since)
        if now - start >= SETTLE_LIMIT_S:
            log.warning("the engine was still busy %.0f s after the phase; measuring anyway", SETTLE_LIMIT_S)
            return now - start


class Progress:
    """Callbacks the runner makes; the CLI shows them, tests ignore them."""

    def stage(self, engine: str, workload: str, stage: str, total: int | None) -> None:
        """A stage ("load", "warm-up", "run") of a phase starts; ``total`` operations (None: unknown)."""

    def advance(self, n: int) -> None:
        """``n`` more operations of the current stage are done (may be called from worker threads)."""

    def phase_done(self, run: dict[str, Any]) -> None:
        """A phase finished; ``run`` is its results.json entry."""

    def engine_error(self, engine: str, message: str) -> None:
        """The engine failed; its remaining phases are skipped."""


@dataclass
class EngineRun:
    engine: str
    title: str
    version: str
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    loads: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: Workloads this engine does not run, each with the reason.
    skipped: dict[str, str] = field(default_factory=dict)


def _stable_hash(text: str) -> int:
    return zlib.crc32(text.encode())


class _Schedule:
    """Hands out the phase's chunks in order, to one or more threads."""

    def __init__(self, stream, prebuilt: list[Chunk] | None, deadline_ns: int | None) -> None:
        self._stream = stream
        self._prebuilt = prebuilt
        self._deadline = deadline_ns
        self._lock = threading.Lock()
        self._next = 0
        self.ops = 0
        self.executed: list[Chunk] = []

    def claim(self) -> tuple[int, Chunk] | None:
        with self._lock:
            if self._deadline is not None and time.perf_counter_ns() >= self._deadline:
                return None
            if self._prebuilt is not None:
                if self._next >= len(self._prebuilt):
                    return None
                chunk = self._prebuilt[self._next]
                self._next += 1
            else:
                chunk = self._stream.next_chunk(CHUNK_SIZE)
                if chunk is None:
                    return None
            base = self.ops
            self.ops += len(chunk)
            self.executed.append(chunk)
            return base, chunk


class _Worker:
    """One thread's share of a timed window: raw per-operation records."""

    def __init__(self) -> None:
        self.lat = array("q")        # latency (ns): service time, or from the due time with --rate
        self.service = array("q")    # service time (ns), --rate only
        self.ends = array("q")       # completion time (ns since the window opened)
        self.kinds = bytearray()
        self.results = [0] * len(OP_NAMES)
        self.error: BaseException | None = None

    def run(self, schedule: _Schedule, handlers: list, start_ns: int, interval_ns: float | None,
            advance: Callable[[int], None]) -> None:
        try:
            self._run(schedule, handlers, start_ns, interval_ns, advance)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            self.error = exc

    def _run(self, schedule: _Schedule, handlers: list, start_ns: int, interval_ns: float | None,
             advance: Callable[[int], None]) -> None:
        clock = time.perf_counter_ns
        lat_append, end_append = self.lat.append, self.ends.append
        results = self.results
        while True:
            claim = schedule.claim()
            if claim is None:
                return
            base, chunk = claim
            if interval_ns is None:
                for kind, key, arg in zip(chunk.kinds, chunk.keys, chunk.args):
                    fn = handlers[kind]
                    t0 = clock()
                    r = fn(key, arg)
                    t1 = clock()
                    lat_append(t1 - t0)
                    end_append(t1 - start_ns)
                    results[kind] += r
            else:
                svc_append = self.service.append
                sleep = time.sleep
                for j, (kind, key, arg) in enumerate(zip(chunk.kinds, chunk.keys, chunk.args)):
                    due = start_ns + int((base + j) * interval_ns)
                    now = clock()
                    if now < due:
                        sleep((due - now) / 1e9)
                    fn = handlers[kind]
                    t0 = clock()
                    r = fn(key, arg)
                    t1 = clock()
                    lat_append(t1 - due)
                    svc_append(t1 - t0)
                    end_append(t1 - start_ns)
                    results[kind] += r
            self.kinds.extend(chunk.kinds)
            advance(len(chunk))


def _handlers(adapter: EngineAdapter) -> list:
    """Operation kind -> callable(key, arg) -> int (found flag or entries read; 0 for writes)."""
    get, put, delete, scan = adapter.get, adapter.put, adapter.delete, adapter.scan

    def h_read(k, a):
        return get(k) is not None

    def h_write(k, v):
        put(k, v)
        return 0

    def h_delete(k, a):
        delete(k)
        return 0

    def h_rmw(k, v):
        found = get(k) is not None
        put(k, v)
        return found

    def h_unsupported(k, a):
        raise AssertionError("not an operation of a timed window")

    table: list = [h_unsupported] * len(OP_NAMES)
    table[READ] = h_read
    table[UPDATE] = table[INSERT] = table[WRITE] = h_write
    table[SCAN] = table[SEEK] = scan
    table[RMW] = h_rmw
    table[DELETE] = h_delete
    return table


class Runner:
    """Runs the configured phases on one engine at a time."""

    def __init__(self, config: BenchConfig, workloads: list[Workload], db_root: str,
                 progress: Progress | None = None) -> None:
        self.config = config
        self.workloads = workloads
        self.db_root = db_root
        self.progress = progress or Progress()

    # --- one engine --------------------------------------------------------------------------

    def run_engine(self, name: str) -> EngineRun:
        cls = get_adapter(name)
        cfg = self.config
        settings = EngineSettings(sync=cfg.sync, cache_size=cfg.cache_size, threads=cfg.threads,
                                  options=dict(cfg.engine_options.get(name, {})))
        result = EngineRun(engine=name, title=cls.title, version=cls.version())
        path = f"{self.db_root}/{name}"
        shutil.rmtree(path, ignore_errors=True)
        dataset = Dataset()
        adapter: EngineAdapter | None = None
        skipped: list[str] = []
        current = "open"
        try:
            adapter = cls(path, settings)
            result.settings = dict(adapter.applied)
            for index, workload in enumerate(self.workloads):
                current = workload.name
                reason = cls.skip_reason(workload)
                if reason is not None:
                    skipped.append(f"{name}: {workload.name} skipped ({reason})")
                    result.skipped[workload.name] = reason
                    continue
                if workload.fresh and dataset.origin != "empty":
                    adapter = self._reopen_fresh(adapter, cls, path, settings)
                plan = workload.load_plan(dataset)
                if plan is not None:
                    if dataset.origin != "empty":
                        adapter = self._reopen_fresh(adapter, cls, path, settings)
                    result.loads.append(self._load(adapter, name, workload.name, plan, dataset, path))
                if workload.fresh:
                    dataset.reset(workload.keyspace(), workload.name)
                run = self._phase(adapter, name, cls.title, workload, index, dataset, path)
                result.runs.append(run)
                self.progress.phase_done(run)
        except Exception as exc:  # noqa: BLE001 - any engine failure is reported, not raised
            log.debug("engine %s failed", name, exc_info=True)
            result.error = f"{name}: {current}: {type(exc).__name__}: {exc}"
            self.progress.engine_error(name, result.error)
        finally:
            if adapter is not None:
                result.notes = list(adapter.notes)
                try:
                    adapter.close()
                except Exception:  # noqa: BLE001
                    log.debug("closing %s failed", name, exc_info=True)
            adapter = None
            result.notes += skipped
            gc.collect()
            if not self.config.keep_db:
                shutil.rmtree(path, ignore_errors=True)
        return result

    def _reopen_fresh(self, adapter: EngineAdapter, cls: type[EngineAdapter], path: str,
                      settings: EngineSettings) -> EngineAdapter:
        adapter.close()
        del adapter
        gc.collect()
        shutil.rmtree(path, ignore_errors=True)
        return cls(path, settings)

    # --- untimed stages ----------------------------------------------------------------------

    def _load(self, adapter: EngineAdapter, engine: str, workload: str, plan: LoadPlan,
              dataset: Dataset, path: str) -> dict[str, Any]:
        dataset.reset(plan.keyspace, plan.origin)
        values = ValuePool(self.config.seed, self.config.value_compressibility)
        self.progress.stage(engine, workload, "load", len(plan.nums))
        stats0 = _safe_stats(adapter)
        io0, t0 = metrics.read_io(), time.perf_counter()
        user_bytes = 0
        for chunk in plan.chunks(values):
            adapter.write_batch(list(zip(chunk.keys, chunk.args)))
            dataset.apply(chunk)
            user_bytes += chunk.user_bytes_written()
            self.progress.advance(len(chunk))
        adapter.flush()
        seconds = time.perf_counter() - t0
        _settle()
        io = metrics.read_io() - io0
        written, _ = metrics.bytes_written(io, metrics.engine_deltas(stats0, _safe_stats(adapter)).get("bytes_written"))
        return {"engine": engine, "before": workload, "origin": plan.origin, "records": len(plan.nums),
                "seconds": round(seconds, 3), "records_per_sec": round(len(plan.nums) / max(seconds, 1e-9), 1),
                "user_bytes_written": user_bytes, "bytes_written": written,
                "io_write_bytes": io.write_bytes if io.available else None,
                "disk_bytes": metrics.directory_bytes(path), "live_bytes": dataset.live_bytes()}

    def _warmup(self, adapter: EngineAdapter, engine: str, workload: Workload, index: int,
                dataset: Dataset) -> int:
        count = self.config.warmup_ops(workload.operations or dataset.live_count)
        if not workload.reads or not count:
            return 0
        rng = np.random.default_rng([self.config.seed, index, _stable_hash(workload.name), 0x7761726D])
        chunk = workload.warmup(dataset, rng, count)
        if chunk is None:
            return 0
        self.progress.stage(engine, workload.name, "warm-up", len(chunk))
        get = adapter.get
        for key in chunk.keys:
            get(key)
        self.progress.advance(len(chunk))
        return len(chunk)

    # --- a phase -----------------------------------------------------------------------------

    def _phase_knobs(self, workload: Workload) -> tuple[int, float | None, float | None]:
        """Threads, rate and duration of a phase (a YCSB file's threadcount/target/
        maxexecutiontime apply unless the command line set them)."""
        cfg = self.config
        threads, rate, duration = cfg.threads, cfg.rate, cfg.duration
        if isinstance(workload, YcsbWorkload):
            spec = workload.spec
            if spec.threadcount and "threads" not in cfg.explicit:
                threads = spec.threadcount
            if spec.target and "rate" not in cfg.explicit:
                rate = spec.target
            if spec.maxexecutiontime and "duration" not in cfg.explicit:
                duration = spec.maxexecutiontime
        return threads, rate, duration

    def _phase(self, adapter: EngineAdapter, engine: str, title: str, workload: Workload, index: int,
               dataset: Dataset, path: str) -> dict[str, Any]:
        cfg = self.config
        warmup = self._warmup(adapter, engine, workload, index, dataset)
        threads, rate, duration = self._phase_knobs(workload)
        if workload.full_scan:
            threads, rate = 1, None

        stats0 = _safe_stats(adapter)
        metrics.reset_peak_rss()
        gc.collect()
        if workload.full_scan:
            assert isinstance(workload, FullScanWorkload)
            expected = workload.entries(dataset)
            self.progress.stage(engine, workload.name, "run", expected)
            io0, cpu0 = metrics.read_io(), metrics.cpu_seconds()
            window = self._full_scan(adapter, workload.reverse, expected, duration)
            executed: list[Chunk] = []
        else:
            rng = np.random.default_rng([cfg.seed, index, _stable_hash(workload.name)])
            values = ValuePool(cfg.seed + index, cfg.value_compressibility)
            # With --duration, a phase that could go on runs until the time is up, unless
            # its operation count was given explicitly.
            unbounded = duration is not None and not workload.bounded and not workload.ops_explicit
            stream = workload.stream(dataset, rng, values, None if unbounded else workload.operations)
            total = stream.remaining
            prebuilt = None
            if total is not None:
                chunks, complete = self._pregenerate(stream, engine, workload.name)
                if complete:
                    prebuilt = chunks
                else:
                    stream = _Prefixed(chunks, stream)
            self.progress.stage(engine, workload.name, "run", total)
            io0, cpu0 = metrics.read_io(), metrics.cpu_seconds()
            window = self._timed(adapter, stream, prebuilt, threads, rate, duration)
            executed = window.pop("executed")
        t_flush = time.perf_counter()
        adapter.flush()
        flush_s = time.perf_counter() - t_flush
        user_bytes = sum(c.user_bytes_written() for c in executed)
        # A phase that wrote (or during which something wrote) waits for the engine to go idle.
        settle_s = _settle() if user_bytes or (metrics.read_io() - io0).write_bytes else 0.0
        io = metrics.read_io() - io0
        cpu = metrics.cpu_seconds() - cpu0
        peak_rss = metrics.peak_rss_bytes()
        stats1 = _safe_stats(adapter)
        for chunk in executed:
            dataset.apply(chunk)

        disk = metrics.directory_bytes(path)
        live = dataset.live_bytes()
        deltas = metrics.engine_deltas(stats0, stats1)
        ops = window["operations"]
        elapsed_s = window["elapsed_ns"] / 1e9
        lat = np.frombuffer(window["lat"], dtype=np.int64) if len(window["lat"]) else np.zeros(0, np.int64)
        kinds = np.frombuffer(bytes(window["kinds"]), dtype=np.uint8)
        hist = metrics.histogram_from_ns(lat)
        engine_written = deltas.get("bytes_written")
        written, written_source = metrics.bytes_written(io, engine_written)
        run: dict[str, Any] = {
            "engine": engine,
            "engine_title": title,
            "workload": workload.name,
            "family": workload.family,
            "description": workload.describe(),
            "operations": ops,
            "elapsed_s": round(elapsed_s, 4),
            "ops_per_sec": round(ops / elapsed_s, 1) if elapsed_s > 0 else 0.0,
            "latency_us": metrics.latency_summary(hist, lat),
            "latency_basis": "from the due time (--rate: coordinated-omission corrected)" if rate
                             else "service time",
            "by_op": _by_op(lat, kinds, elapsed_s),
            "warmup_ops": warmup,
            "threads": threads,
            "target_rate": rate,
            "duration_limit_s": duration,
            "found": window["results"][READ] + window["results"][RMW],
            "reads": int(np.isin(kinds, [READ, RMW]).sum()),
            "scan_entries": window["results"][SCAN] + window["results"][SEEK] + window["results"][NEXT],
            "user_bytes_written": user_bytes,
            "io_write_bytes": io.write_bytes if io.available else None,
            "io_read_bytes": io.read_bytes if io.available else None,
            "io_cancelled_write_bytes": io.cancelled_write_bytes if io.available else None,
            "io_wchar_bytes": io.wchar if io.available else None,
            "engine_bytes_written": engine_written,
            "bytes_written": written,
            "write_amp": _round(metrics.ratio(written, user_bytes)),
            "write_amp_source": written_source,
            "write_amp_engine": _round(metrics.ratio(engine_written, user_bytes)),
            "write_amp_wchar": _round(metrics.ratio(io.wchar if io.available else None, user_bytes)),
            "write_amp_dirty": _round(metrics.ratio(io.write_bytes if io.available else None, user_bytes)),
            "disk_bytes": disk,
            "live_bytes": live,
            "live_records": dataset.live_count,
            "space_amp": _round(metrics.ratio(disk, live)),
            "read_amp": _round(metrics.phase_read_amp(stats0, stats1)),
            "cpu_s": round(cpu, 3),
            "cpu_us_per_op": round(cpu / ops * 1e6, 2) if ops else None,
            "peak_rss_mb": round(peak_rss / (1 << 20), 1),
            "flush_s": round(flush_s, 4),
            "settle_s": round(settle_s, 3),
            "stall_s": _round(_stall_seconds(deltas)),
            "compaction_bytes_written": deltas.get("compaction_bytes_written"),
            "flush_bytes_written": deltas.get("flush_bytes_written"),
            "write_heavy": workload.write_fraction >= 0.5,
            "timeline": metrics.throughput_timeline(window["ends"], window["elapsed_ns"]),
            "engine_stats": json_safe(stats1),
            "engine_deltas": {k: _round(v) for k, v in deltas.items()},
            "latency_cdf": metrics.latency_cdf(lat),
            "latency_hist": base64.b64encode(hist.encode() if hist.get_total_count() else b"").decode(),
        }
        if workload.full_scan:
            run["entries_expected"] = workload.entries(dataset)
        if rate:
            svc = np.frombuffer(window["service"], dtype=np.int64)
            run["service_us"] = metrics.latency_summary(metrics.histogram_from_ns(svc), svc)
        return run

    def _pregenerate(self, stream, engine: str, workload: str) -> tuple[list[Chunk], bool]:
        """The chunks of a bounded stream, generated before the timed window; stops
        early (returning False) when they would take too much memory, in which case
        the rest is generated while the phase runs."""
        chunks: list[Chunk] = []
        size = 0
        self.progress.stage(engine, workload, "generate", stream.remaining)
        while True:
            chunk = stream.next_chunk(CHUNK_SIZE)
            if chunk is None:
                return chunks, True
            chunks.append(chunk)
            size += sum(len(k) + 50 for k in chunk.keys) + sum(
                len(a) + 33 for a in chunk.args if isinstance(a, bytes))
            if size > PREGENERATE_LIMIT_BYTES:
                log.info("%s: operations generated while the phase runs (they need more than %d MiB)",
                         workload, PREGENERATE_LIMIT_BYTES >> 20)
                return chunks, False
            self.progress.advance(len(chunk))

    def _timed(self, adapter: EngineAdapter, stream, prebuilt: list[Chunk] | None, threads: int,
               rate: float | None, duration: float | None) -> dict[str, Any]:
        handlers = _handlers(adapter)
        workers = [_Worker() for _ in range(threads)]
        interval_ns = 1e9 / rate if rate else None
        start = time.perf_counter_ns()
        deadline = start + int(duration * 1e9) if duration else None
        schedule = _Schedule(stream, prebuilt, deadline)
        advance = self.progress.advance
        if threads == 1:
            workers[0].run(schedule, handlers, start, interval_ns, advance)
        else:
            pool = [threading.Thread(target=w.run, args=(schedule, handlers, start, interval_ns, advance),
                                     name=f"bench-worker-{i}") for i, w in enumerate(workers)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
        elapsed = time.perf_counter_ns() - start
        for w in workers:
            if w.error is not None:
                raise w.error
        results = [sum(w.results[k] for w in workers) for k in range(len(OP_NAMES))]
        lat, service, ends, kinds = array("q"), array("q"), array("q"), bytearray()
        for w in workers:
            lat.extend(w.lat)
            service.extend(w.service)
            ends.extend(w.ends)
            kinds.extend(w.kinds)
        return {"operations": len(lat), "elapsed_ns": elapsed, "lat": lat, "service": service, "ends": ends,
                "kinds": kinds, "results": results, "executed": schedule.executed}

    def _full_scan(self, adapter: EngineAdapter, reverse: bool, limit: int,
                   duration: float | None) -> dict[str, Any]:
        clock = time.perf_counter_ns
        lat, ends = array("q"), array("q")
        advance = self.progress.advance
        start = clock()
        deadline = start + int(duration * 1e9) if duration else None
        nxt = iter(adapter.iterate(reverse)).__next__
        n = 0
        while n < limit:
            t0 = clock()
            try:
                nxt()
            except StopIteration:
                break
            t1 = clock()
            lat.append(t1 - t0)
            ends.append(t1 - start)
            n += 1
            if not n % CHUNK_SIZE:
                advance(CHUNK_SIZE)
                if deadline is not None and t1 >= deadline:
                    break
        elapsed = clock() - start
        advance(n % CHUNK_SIZE)
        results = [0] * len(OP_NAMES)
        results[NEXT] = n
        return {"operations": n, "elapsed_ns": elapsed, "lat": lat, "service": array("q"), "ends": ends,
                "kinds": bytearray([NEXT]) * n, "results": results}


class _Prefixed:
    """A stream that first replays already generated chunks."""

    def __init__(self, chunks: list[Chunk], stream) -> None:
        self._chunks = list(chunks)
        self._stream = stream

    def next_chunk(self, size: int = CHUNK_SIZE) -> Chunk | None:
        if self._chunks:
            return self._chunks.pop(0)
        return self._stream.next_chunk(size)


def _by_op(lat: np.ndarray, kinds: np.ndarray, elapsed_s: float) -> dict[str, Any]:
    out = {}
    for kind in np.unique(kinds).tolist():
        sel = lat[kinds == kind]
        hist = metrics.histogram_from_ns(sel)
        out[OP_NAMES[kind]] = {
            "operations": int(sel.size),
            "ops_per_sec": round(sel.size / elapsed_s, 1) if elapsed_s > 0 else 0.0,
            "latency_us": metrics.latency_summary(hist, sel),
        }
    return out


def _stall_seconds(deltas: dict[str, float]) -> float | None:
    """Time writers were held back: stopped (``stall_seconds``) plus slowed down
    (``slowdown_seconds``), where the engine counts them."""
    parts = [deltas[k] for k in ("stall_seconds", "slowdown_seconds") if k in deltas]
    return sum(parts) if parts else None


def _safe_stats(adapter: EngineAdapter) -> dict[str, Any]:
    try:
        stats = adapter.stats()
        return dict(stats) if isinstance(stats, dict) else {}
    except Exception:  # noqa: BLE001 - stats are best effort
        log.debug("stats() failed", exc_info=True)
        return {}


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)
