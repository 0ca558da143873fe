"""YCSB property files: parsing, YCSB's defaults, unknown and ignored properties, operation mixes."""

from __future__ import annotations

import numpy as np
import pytest

from bench.config import BenchConfig, parse_workloads
from bench.data import ValuePool
from bench.workloads import INSERT, READ, RMW, SCAN, UPDATE, Dataset, YcsbWorkload, make_workloads
from bench.ycsb import YcsbError, builtin_spec, load_workload_file, parse_properties, spec_from_properties

# workloads/workloadd of the YCSB distribution, abridged but with its comments and layout.
WORKLOAD_D = """\
# Copyright (c) 2010 Yahoo! Inc. All rights reserved.
#
# Workload D: Read latest workload
#   Application example: user status updates; people want to read the latest
#
#   Read/update ratio: 95/5
#   Default data size: 1 KB records (10 fields, 100 bytes each, plus key)
#   Request distribution: latest

# The insert order for this is hashed, not ordered. The "latest" items may be
# scattered around the keyspace if they are keyed by userid.timestamp. A workload
# which orders items purely by time, and demands the latest, is very different than
# workload here (which we believe is more typical of how people build systems.)

recordcount=1000
operationcount=1000
workload=site.ycsb.workloads.CoreWorkload

readallfields=true

readproportion=0.95
updateproportion=0
scanproportion=0
insertproportion=0.05

requestdistribution=latest

"""


def test_parse_java_properties_syntax():
    props = parse_properties(
        "# comment\n! also a comment\n\n  a = 1\nb:2\nc 3\nd=x\\\n   y\ne=tab\\there\nf=\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": "tab\there", "f": ""}


def test_workload_file_resolves_with_ycsb_defaults(tmp_path):
    path = tmp_path / "workloadd"
    path.write_text(WORKLOAD_D)
    spec = load_workload_file(str(path))
    assert spec.name == "ycsb:workloadd"
    assert spec.recordcount == 1000 and spec.operationcount == 1000
    assert spec.proportions == pytest.approx({"read": 0.95, "update": 0.0, "insert": 0.05, "scan": 0.0,
                                              "readmodifywrite": 0.0})
    assert spec.requestdistribution == "latest"
    # YCSB defaults for what the file does not say.
    assert spec.fieldcount == 10 and spec.fieldlength == 100 and spec.record_size == 1000
    assert spec.hashed is True and spec.maxscanlength == 1000
    assert spec.unknown == []
    assert set(spec.ignored) == {"workload", "readallfields"}


def test_unknown_properties_are_reported_not_dropped(tmp_path):
    path = tmp_path / "mine"
    path.write_text(WORKLOAD_D + "readproportoin=0.5\nmongodb.url=mongodb://x\nthreadcount=2\n")
    spec = load_workload_file(str(path))
    assert spec.unknown == ["mongodb.url", "readproportoin"]
    assert spec.threadcount == 2  # a client property, mapped onto --threads


def test_missing_proportions_take_ycsb_defaults():
    spec = spec_from_properties({"recordcount": "10", "operationcount": "5", "insertproportion": "0.05"},
                                name="x")
    # readproportion defaults to 0.95 and updateproportion to 0.05 in YCSB; normalized to sum 1.
    assert spec.proportions["read"] == pytest.approx(0.95 / 1.05)
    assert spec.proportions["update"] == pytest.approx(0.05 / 1.05)
    assert spec.requestdistribution == "uniform"


@pytest.mark.parametrize("props,message", [
    ({"requestdistribution": "gaussian"}, "requestdistribution='gaussian'"),
    ({"recordcount": "many"}, "recordcount='many' is not a valid integer"),
    ({"insertorder": "random"}, "insertorder='random'"),
    ({"workload": "site.ycsb.workloads.TimeSeriesWorkload"}, "only the core workload"),
    ({"readproportion": "0", "updateproportion": "0"}, "all operation proportions are zero"),
])
def test_bad_values_are_one_line_errors(props, message):
    with pytest.raises(YcsbError, match=message.replace("(", r"\(")):
        spec_from_properties(props, name="w")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(YcsbError, match="cannot read YCSB workload file"):
        load_workload_file(str(tmp_path / "nope"))


def _ops(workload: YcsbWorkload, dataset: Dataset, count: int):
    stream = workload.stream(dataset, np.random.default_rng(1), ValuePool(1), count)
    kinds, nums, args = [], [], []
    while (chunk := stream.next_chunk()) is not None:
        kinds += chunk.kinds
        nums += chunk.nums.tolist()
        args += chunk.args
    return np.array(kinds), np.array(nums), args


def _loaded(workload: YcsbWorkload) -> Dataset:
    ds = Dataset()
    plan = workload.load_plan(ds)
    ds.reset(plan.keyspace, plan.origin)
    for chunk in plan.chunks(ValuePool(0)):
        ds.apply(chunk)
    return ds


@pytest.mark.parametrize("letter,mix", [
    ("a", {READ: 0.5, UPDATE: 0.5}), ("b", {READ: 0.95, UPDATE: 0.05}), ("c", {READ: 1.0}),
    ("d", {READ: 0.95, INSERT: 0.05}), ("e", {SCAN: 0.95, INSERT: 0.05}), ("f", {READ: 0.5, RMW: 0.5}),
])
def test_builtin_workloads_have_the_standard_mix(letter, mix):
    w = YcsbWorkload(builtin_spec(letter, recordcount=2000, operationcount=20_000))
    ds = _loaded(w)
    assert ds.live_count == 2000
    kinds, nums, args = _ops(w, ds, 20_000)
    assert len(kinds) == 20_000
    for kind, share in mix.items():
        assert (kinds == kind).mean() == pytest.approx(share, abs=0.015)
    assert set(np.unique(kinds)) <= set(mix)
    # Reads, updates and scans only touch records that exist when they run.
    inserts = kinds == INSERT
    assert nums[~inserts].max() < 2000 + inserts.sum()
    if inserts.any():
        # Inserts create new records, in order, after the loaded ones.
        assert nums[inserts].tolist() == list(range(2000, 2000 + int(inserts.sum())))
    if letter == "e":
        lengths = np.array([a for k, a in zip(kinds, args) if k == SCAN])
        assert lengths.min() >= 1 and lengths.max() <= 100
        assert lengths.mean() == pytest.approx(50.5, abs=2)
    writes = [a for k, a in zip(kinds, args) if k in (UPDATE, INSERT, RMW)]
    assert all(len(v) == 1000 for v in writes)


def test_workload_d_reads_recent_records_more():
    w = YcsbWorkload(builtin_spec("d", recordcount=10_000, operationcount=20_000))
    kinds, nums, _ = _ops(w, _loaded(w), 20_000)
    reads = nums[kinds == READ]
    assert (reads >= 9_000).mean() > 0.5  # the newest 10% of records get most reads


def test_command_line_knobs_override_the_file(tmp_path):
    path = tmp_path / "workloada"
    path.write_text("recordcount=1000\noperationcount=1000\nreadproportion=0.5\nupdateproportion=0.5\n"
                    "requestdistribution=zipfian\n")
    cfg = BenchConfig(workloads=[], ycsb_files=[str(path)], records=300, operations=77, value_size=64,
                      explicit={"records", "operations", "value_size"})
    (w,) = make_workloads(cfg)
    assert isinstance(w, YcsbWorkload)
    assert w.spec.recordcount == 300 and w.operations == 77 and w.spec.record_size == 64
    # Without explicit knobs, the file's values hold.
    cfg = BenchConfig(workloads=[], ycsb_files=[str(path)])
    (w,) = make_workloads(cfg)
    assert w.spec.recordcount == 1000 and w.operations == 1000 and w.spec.record_size == 1000


def test_builtin_names_and_counts():
    cfg = BenchConfig(workloads=parse_workloads("ycsb-a:123,ycsb-e"), records=500, operations=1000)
    a, e = make_workloads(cfg)
    assert a.operations == 123 and a.spec.recordcount == 500
    assert e.operations == 100  # scan workloads default to a tenth of --operations
