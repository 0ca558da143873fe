"""The loader's parts that need no broker: the workload and its expected
table, settings and their checks, processors and their results, the
store's offset entries, retry backoff, and processor units (key order
under parallelism, retries on the timing wheel)."""

from __future__ import annotations

import random
import threading
import time

import pytest

import lsmkv
from lsmkv.base.errors import CorruptionError, OptionError
from lsmkv.base.timer import Timer
from lsmkv.kafka import LoaderSettings, WorkloadSpec, expected_table, stored_offset, stored_offsets
from lsmkv.kafka.offsets import meta_name
from lsmkv.kafka.runtime.commit_control import OffsetWindow
from lsmkv.kafka.runtime.metrics import LoaderMetrics
from lsmkv.kafka.runtime.partition import FENCED, PartitionState
from lsmkv.kafka.runtime.processor import BadResult, Record, store_ops
from lsmkv.kafka.runtime.retry import RetryPolicy, RetryScheduler
from lsmkv.kafka.runtime.units import ProcessorUnit, unit_of
from lsmkv.kafka.settings import load_processor
from lsmkv.kafka.tools.workload import generate, parse_value


# -- the workload --------------------------------------------------------------------------------------

@pytest.mark.parametrize("distribution", ["uniform", "zipfian", "sequential"])
def test_the_stream_is_a_function_of_its_spec(distribution):
    spec = WorkloadSpec(records=5000, keys=300, distribution=distribution, value_size=60, tombstone_ratio=0.1,
                        seed=7)
    first = list(generate(spec))
    assert first == list(generate(spec)) and len(first) == 5000
    assert first != list(generate(WorkloadSpec(**{**spec.__dict__, "seed": 8})))
    counters: dict[bytes, int] = {}
    for key, value in first:
        counters[key] = counters.get(key, 0) + 1
        if value is not None:
            index, counter = parse_value(value)
            assert key == spec.key(index) and counter == counters[key] and len(value) == 60
    assert 0.05 < sum(v is None for _, v in first) / 5000 < 0.15
    table = expected_table(spec)
    last = {}
    for key, value in first:
        last[key] = value
    assert table == {k: v for k, v in last.items() if v is not None}


def test_distributions_differ_in_skew():
    def top_share(distribution):
        spec = WorkloadSpec(records=20000, keys=1000, distribution=distribution, seed=1)
        counts: dict[bytes, int] = {}
        for key, _ in generate(spec):
            counts[key] = counts.get(key, 0) + 1
        return max(counts.values()) / 20000, len(counts)

    zipf, zipf_keys = top_share("zipfian")
    uniform, _ = top_share("uniform")
    sequential, seq_keys = top_share("sequential")
    assert zipf > 5 * uniform and sequential == 20 / 20000 and seq_keys == 1000


@pytest.mark.parametrize("kwargs, message", [
    ({"records": -1}, "records must be"), ({"keys": 0}, "keys must be"), ({"distribution": "latest"}, "one of"),
    ({"tombstone_ratio": 1.5}, "from 0 to 1"), ({"compressibility": "x"}, "from 0 to 1"),
])
def test_bad_workload_specs_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WorkloadSpec(**{"records": 10, "keys": 10, **kwargs})


# -- settings --------------------------------------------------------------------------------------------

BASE = dict(bootstrap_servers="127.0.0.1:9", topics=["t"], group="g")


def test_settings_derive_a_tuned_consumer_and_pass_security_through():
    s = LoaderSettings(**BASE, client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                              "fetch.wait.max.ms": 20})
    conf = s.consumer_config()
    assert conf["auto.offset.reset"] == "error"  # never a silent jump: the loader handles a missing offset
    with pytest.raises(OptionError, match="may not set auto.offset.reset"):
        LoaderSettings(**BASE, client_config={"auto.offset.reset": "earliest"})
    assert conf["security.protocol"] == "SASL_SSL" and conf["fetch.wait.max.ms"] == 20
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert conf["session.timeout.ms"] == 6000 and conf["group.id"] == "g" and s.cooperative
    assert s.producer_config()["sasl.mechanism"] == "PLAIN" and "fetch.wait.max.ms" not in s.producer_config()
    assert s.dlq_for("t") == "t.dlq" and LoaderSettings(**BASE, dlq_topic="dead").dlq_for("t") == "dead"


@pytest.mark.parametrize("kwargs, message", [
    ({"topics": []}, "topics must be"), ({"topics": ["a:b"]}, "topics must be"), ({"topics": ["a", "a"]}, "twice"),
    ({"group": ""}, "group must be"), ({"concurrency": 0}, "concurrency must be"),
    ({"max_pending": 1.5}, "max_pending must be"), ({"linger": -1}, "linger must be"),
    ({"commit_interval": 0}, "commit_interval must be"), ({"retry_backoff_max": 0.01}, "below retry_backoff"),
    ({"dlq_topic": "t"}, "other than the source"), ({"heartbeat_interval_ms": 3000}, "at most a third"),
    ({"processor": 5}, "processor must be callable"), ({"client_config": {"enable.auto.commit": True}}, "may not set"),
    ({"client_config": {"group.id": "x"}}, "may not set"), ({"bootstrap_servers": ""}, "bootstrap_servers"),
])
def test_bad_settings_are_refused_with_one_clear_error(kwargs, message):
    with pytest.raises(OptionError, match=message):
        LoaderSettings(**{**BASE, **kwargs})


# -- processors ------------------------------------------------------------------------------------------

def upper(record):
    return record.key, record.value.upper()


def test_processors_load_by_name_and_their_results_are_checked():
    assert load_processor(f"{__name__}:upper")(Record("t", 0, 0, b"k", b"v")) == (b"k", b"V")
    for spec, message in (("nocolon", "module:function"), ("no_such_module_x:f", "cannot be imported"),
                          (f"{__name__}:missing", "has no"), (f"{__name__}:BASE", "not callable")):
        with pytest.raises(OptionError, match=message):
            load_processor(spec)
    assert store_ops(None, 10) is None
    assert store_ops((b"k", None), 10) == [(b"k", None)]
    assert store_ops((bytearray(b"k"), memoryview(b"v")), 10) == [(b"k", b"v")]
    for result, message in ((b"k", "must return"), (("k", b"v"), "must be bytes"), ((b"k" * 11, b"v"), "at most 10"),
                            ((b"k", 5), "bytes or None"), ((b"k", b"v", b"x"), "must return")):
        with pytest.raises(BadResult, match=message):
            store_ops(result, 10)


# -- offsets in the store ------------------------------------------------------------------------------

def test_offsets_live_in_the_store_metadata(tmp_path):
    with lsmkv.open(str(tmp_path / "db")) as db:
        assert stored_offset(db, "orders", 3) is None
        with db.write_batch() as batch:
            batch.put(b"k", b"v")
            batch.set_meta(meta_name("orders", 3), b"1234")
            batch.set_meta(meta_name("a.b-c", 0), b"7")
            batch.set_meta("unrelated", b"x")
        assert stored_offset(db, "orders", 3) == 1234
        assert stored_offsets(db) == {("orders", 3): 1234, ("a.b-c", 0): 7}
        with db.write_batch() as batch:
            batch.set_meta(meta_name("bad", 0), b"12x")
        with pytest.raises(CorruptionError, match="not a Kafka offset"):
            stored_offset(db, "bad", 0)
    with pytest.raises(ValueError, match="too long"):
        meta_name("t" * 249, 10)


# -- retries ---------------------------------------------------------------------------------------------

def test_backoff_grows_to_its_cap_with_jitter():
    policy = RetryPolicy(max_retries=3, backoff=0.1, backoff_max=0.5)
    rng = random.Random(1)
    delays = [[policy.delay(n, rng) for _ in range(200)] for n in (1, 2, 3, 4, 5)]
    for n, ds in zip((1, 2, 3, 4, 5), delays):
        base = min(0.1 * 2 ** (n - 1), 0.5)
        assert base * 0.8 <= min(ds) and max(ds) <= base * 1.2 and max(ds) - min(ds) > base * 0.2
    assert not policy.gives_up(3) and policy.gives_up(4)


def test_retries_run_on_the_timing_wheel_and_cancel_by_owner():
    timer = Timer(tick=0.001)
    try:
        sched = RetryScheduler(RetryPolicy(max_retries=3, backoff=0.02, backoff_max=0.02), timer)
        fired = []
        sched.schedule("p0", 1, lambda: fired.append("a"))
        sched.schedule("p1", 1, lambda: fired.append("b"))
        assert sched.pending("p1") == 1 and sched.cancel("p1") == 1 and sched.pending("p1") == 0
        deadline = time.monotonic() + 5
        while not fired and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        assert fired == ["a"] and sched.pending("p0") == 0
    finally:
        timer.close()


# -- processor units -----------------------------------------------------------------------------------

def test_units_keep_key_order_while_keys_run_in_parallel_and_retries_hold_their_key():
    """Four units, a processor that sleeps at random and fails some records
    the first time: every key's records reach the processor's success in
    offset order, a failed record's later same-key records wait for it,
    other keys overtake it, and every record completes once."""
    timer = Timer(tick=0.001)
    metrics = LoaderMetrics()
    ps = PartitionState("t", 0, 0, 10_000, metrics)
    window = ps.window
    sched = RetryScheduler(RetryPolicy(max_retries=3, backoff=0.01, backoff_max=0.02), timer)
    lock = threading.Lock()
    succeeded: list[tuple[bytes, int]] = []
    failed_once: set[int] = set()
    threads_seen: set[str] = set()

    def processor(record):
        time.sleep(random.random() * 0.002)
        threads_seen.add(threading.current_thread().name)
        if record.offset % 17 == 3 and record.offset not in failed_once:
            failed_once.add(record.offset)
            raise RuntimeError("transient")
        with lock:
            succeeded.append((record.key, record.offset))
        return record.key, record.value

    completed = []
    units = [ProcessorUnit(f"u{i}", processor, 100, scheduler=sched, dead_letters=None,
                           on_complete=completed.append, partition_state=ps) for i in range(4)]
    try:
        keys = [b"key%d" % (i % 23) for i in range(600)]
        per_unit: list[list] = [[] for _ in units]
        for offset, key in enumerate(keys):
            entry = window.register(offset)
            per_unit[unit_of(key, 4)].append((Record("t", 0, offset, key, b"v%d" % offset), entry))
        for unit, items in zip(units, per_unit):
            unit.submit(items)
        deadline = time.monotonic() + 30
        taken = []
        while len(taken) < 600 and time.monotonic() < deadline:
            ops, count, _, _ = window.take_ready(1000, 1 << 30)
            taken += ops
            time.sleep(0.005)
        assert [op[0][1] for op in taken] == [b"v%d" % o for o in range(600)]  # applied in offset order
        by_key: dict[bytes, list[int]] = {}
        for key, offset in succeeded:
            by_key.setdefault(key, []).append(offset)
        assert all(offsets == sorted(offsets) for offsets in by_key.values())
        assert sum(completed) == 600 and len(succeeded) == 600
        assert metrics.retries == len(failed_once) > 10 and len(threads_seen) == 4
        # A failed record was overtaken by other keys: success order is not offset order overall.
        assert [o for _, o in succeeded] != sorted(o for _, o in succeeded)
    finally:
        ps.state = FENCED
        for unit in units:
            unit.stop()
            unit.join(5)
        timer.close()


def test_unit_routing_is_stable_and_spreads_keys():
    keys = [b"k%d" % i for i in range(4000)]
    assert [unit_of(k, 8) for k in keys] == [unit_of(k, 8) for k in keys]
    counts = [0] * 8
    for k in keys:
        counts[unit_of(k, 8)] += 1
    assert min(counts) > 400 and unit_of(b"anything", 1) == 0


def test_offset_window_ignores_a_fenced_unit_completion():
    ps = PartitionState("t", 1, None, 10, LoaderMetrics())
    assert isinstance(ps.window, OffsetWindow) and ps.window.next_offset is None
    ps.state = FENCED
    assert ps.fenced and not ps.active and not ps.caught_up(10**9)


# -- stale fetches -------------------------------------------------------------------------------------


class _Msg:
    """A consumed record as confluent_kafka hands it out (what the dispatch reads)."""

    def __init__(self, offset: int, topic: str = "t", partition: int = 0) -> None:
        self._offset, self._topic, self._partition = offset, topic, partition

    def error(self):
        return None

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def key(self):
        return b"k%d" % self._offset

    def value(self):
        return b"v%d" % self._offset

    def headers(self):
        return None

    def timestamp(self):
        return (1, 0)


class _Consumer:
    def __init__(self, failing_seeks: int = 0) -> None:
        self.calls: list = []
        self.failing_seeks = failing_seeks

    def seek(self, tp) -> None:
        if self.failing_seeks:
            self.failing_seeks -= 1
            raise RuntimeError("Local: Erroneous state")
        self.calls.append(("seek", tp.topic, tp.partition, tp.offset))

    def resume(self, tps) -> None:
        self.calls += [("resume", tp.topic, tp.partition) for tp in tps]


class _Unit:
    def __init__(self) -> None:
        self.records: list = []

    def submit(self, items) -> None:
        self.records += [record for record, _ in items]


class _Restorer:
    def __init__(self) -> None:
        self.done: list = []

    def finished(self) -> list:
        out, self.done = self.done, []
        return out


class _Changelog:
    def __init__(self) -> None:
        self.runs: list = []

    def begin(self, partition: int, start: int) -> None:
        self.runs.append((partition, start))


class _Applier:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.completed_records = 0

    def completed(self, n: int) -> None:
        self.completed_records += n


@pytest.mark.parametrize("processor", [None, upper], ids=["no processor", "processor"])
def test_records_fetched_from_before_a_restores_seek_are_dropped_and_none_at_or_past_it(tmp_path, processor):
    """A partition is assigned at its beginning and paused while the restore
    thread decides where it starts (2694, where the changelog ends); the
    loader seeks it there. librdkafka can still deliver records from the
    assigned start after the seek (a ListOffsets answer the seek made
    outdated sends the partition back to BEGINNING; measured on the embedded
    broker: 2694..2999, then 0..2999 again), and once delivered one at
    offset 0 right after the seek, which crashed the load ("offset 0
    registered after 2693"). Records below the position are dropped and
    counted; every record from 2694 on is registered exactly once."""
    from lsmkv.kafka import Loader
    from lsmkv.kafka.runtime.partition import ACTIVE

    settings = LoaderSettings(**BASE, changelog=True, processor=processor)
    loader = Loader(settings, tmp_path / "shards", partitioned=True)
    try:
        applier, restorer, changelog = _Applier(), _Restorer(), _Changelog()
        loader._changelog.attach(changelog, restorer, applier)
        dispatch = loader._processing(applier, scheduler=None, dead_letters=None).dispatch
        consumer = _Consumer()
        # As the assignment leaves it: no shard offset, assigned at the beginning, paused until restored.
        ps = PartitionState("t", 0, None, 20_000, loader.metrics)
        ps.restore_pending = ps.paused = True
        ps.units = [_Unit(), _Unit()] if processor is not None else []
        loader.partitions.add([ps])
        dispatch([_Msg(0), _Msg(1)])   # fetched before the pause took: not taken while pending
        assert ps.window.registered == 0 and ps.state == ACTIVE

        restorer.done.append((ps, 2694))   # restored from the changelog up to 2694
        loader._changelog.resume_restored(consumer)
        assert consumer.calls == [("seek", "t", 0, 2694), ("resume", "t", 0)]
        assert changelog.runs == [(0, 2694)] and not ps.restore_pending

        # The first batch after the seek starts at the assigned start (the failure's order) ...
        dispatch([_Msg(0), _Msg(1), _Msg(2694), _Msg(2695)])
        # ... and librdkafka goes back again after records past the seek: those come twice.
        dispatch([_Msg(2693), _Msg(2694), _Msg(2695), _Msg(2696), _Msg(2697)])
        dispatch([_Msg(2697), _Msg(2698)])

        if processor is None:
            ops, count, _, progress = ps.window.take_ready(1000, 1 << 30)
            taken = [int(key[1:]) for chunk in ops for key, _ in chunk]
            assert applier.completed_records == count
        else:
            taken = sorted(r.offset for unit in ps.units for r in unit.records)
            count, progress = len(taken), ps.window.last_registered
        assert taken == [2694, 2695, 2696, 2697, 2698] and count == 5 and progress == 2699
        assert ps.window.registered == 5 and ps.position == ps.fetched_next == 2699
        assert ps.metrics.first_fetched == 2694 and ps.metrics.fetched == loader.metrics.fetched == 5
        snap = loader.snapshot()
        assert snap["stale_records_dropped"] == 6 and snap["partitions"][0]["stale_dropped"] == 6
        assert snap["records_fetched"] == 5
        # The window still refuses a record out of order: the guard against real ordering bugs.
        with pytest.raises(ValueError, match="offset 2 registered after 2698"):
            ps.window.register(2)
    finally:
        loader.shards.close()


def test_a_restored_partition_whose_seek_failed_resumes_once_the_seek_again_succeeds(tmp_path):
    """The seek that resumes a restored partition failed, so it stayed
    paused in the client; the loader counts it as running. The seek tried again later
    resumes it too (otherwise it would never fetch again)."""
    from lsmkv.kafka import Loader

    loader = Loader(LoaderSettings(**BASE, changelog=True), tmp_path / "shards", partitioned=True)
    try:
        restorer = _Restorer()
        loader._changelog.attach(_Changelog(), restorer, _Applier())
        reseeks = loader._errors.reseeks
        consumer = _Consumer(failing_seeks=1)
        ps = PartitionState("t", 0, None, 20_000, loader.metrics)
        ps.restore_pending = ps.paused = True
        loader.partitions.add([ps])
        restorer.done.append((ps, 40))
        loader._changelog.resume_restored(consumer)
        assert consumer.calls == [] and not ps.paused and ps.key in reseeks
        loader._errors.seek_again(consumer, time.monotonic() + 60, loader.partitions)
        assert consumer.calls == [("seek", "t", 0, 40), ("resume", "t", 0)] and not reseeks
        # A partition paused by flow control is sought but stays paused.
        consumer.calls.clear()
        ps.paused = True
        reseeks[ps.key] = 0.0
        loader._errors.seek_again(consumer, time.monotonic(), loader.partitions)
        assert consumer.calls == [("seek", "t", 0, 40)]
    finally:
        loader.shards.close()
