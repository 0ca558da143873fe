"""``lsmkv kafka demo``: the whole path once, end to end, on this machine.

Start the embedded broker on a free loopback port, publish a seeded keyed
workload to a topic, load it into an lsmkv store and into a btree store
(``--until-caught-up``), and check that each store holds exactly the
table the workload leaves (computed from the spec, without the broker)
and the offsets of every partition's end. The stores go to a new
temporary directory, removed at the end (whatever happened) unless asked
to keep it, or to a directory the caller names, which stays.
:func:`run_demo` returns what happened; the CLI prints it. Nothing here
prints.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Callable

from .broker import EmbeddedBroker
from ..runtime.loader import Loader, LoadSummary
from ..offsets import stored_offsets
from .producer import ProduceResult, produce_workload
from ..settings import LoaderSettings
from ..store import open_store
from .workload import WorkloadSpec, expected_table


@dataclass
class EngineRun:
    engine: str
    path: str
    summary: LoadSummary
    #: Keys the store holds, keys expected, and whether the tables are equal.
    keys: int = 0
    expected_keys: int = 0
    equal: bool = False
    #: Keys with the wrong value, missing, or extra (at most 5 each, for the report).
    wrong: list = field(default_factory=list)
    offsets: dict = field(default_factory=dict)


@dataclass
class DemoResult:
    bootstrap_servers: str
    topic: str
    spec: WorkloadSpec
    produced: ProduceResult
    runs: list[EngineRun]
    #: Where the stores were written, and whether they are still there.
    workdir: str = ""
    kept: bool = True

    @property
    def ok(self) -> bool:
        return self.produced.errors == 0 and all(r.equal for r in self.runs)


def _compare(db, expected: dict[bytes, bytes]) -> tuple[int, bool, list]:
    got = dict(db.scan())
    wrong = []
    for key in sorted(set(got) | set(expected)):
        if got.get(key) != expected.get(key):
            wrong.append((key, expected.get(key), got.get(key)))
            if len(wrong) >= 5:
                break
    return len(got), not wrong and len(got) == len(expected), wrong


def run_demo(spec: WorkloadSpec, *, partitions: int = 8, concurrency: int = 4, workdir: str | None = None,
             keep: bool = False, engines: tuple[str, ...] = ("lsm", "btree"),
             progress: Callable[[str], None] = lambda text: None) -> DemoResult:
    """Run the demonstration; stores go to ``workdir``, or (None) to a new
    temporary directory that is removed at the end unless ``keep``."""
    if workdir is not None:
        return _run(spec, partitions, concurrency, workdir, engines, progress)
    workdir = tempfile.mkdtemp(prefix="lsmkv-kafka-demo-")
    try:
        result = _run(spec, partitions, concurrency, workdir, engines, progress)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result.kept = keep
    return result


def _run(spec: WorkloadSpec, partitions: int, concurrency: int, workdir: str, engines: tuple[str, ...],
         progress: Callable[[str], None]) -> DemoResult:
    topic = "lsmkv-demo"
    with EmbeddedBroker() as broker:
        progress(f"embedded broker on {broker.bootstrap_servers}")
        produced = produce_workload(broker.bootstrap_servers, topic, spec, partitions=partitions)
        progress(f"produced {produced.delivered:,} records ({produced.records_per_sec:,.0f}/s, "
                 f"{produced.errors} errors)")
        expected = expected_table(spec)
        runs = []
        for engine in engines:
            path = os.path.join(workdir, f"{engine}.db")
            settings = LoaderSettings(bootstrap_servers=broker.bootstrap_servers, topics=[topic],
                                      group=f"lsmkv-demo-{engine}", until_caught_up=True, concurrency=concurrency)
            progress(f"loading into {engine} at {path}")
            summary = Loader(settings, path, engine=engine, name=engine).run()
            run = EngineRun(engine, path, summary, expected_keys=len(expected))
            db = open_store(path, engine, {"read_only": True})
            try:
                run.keys, run.equal, run.wrong = _compare(db, expected)
                run.offsets = stored_offsets(db)
            finally:
                db.close()
            runs.append(run)
    return DemoResult(broker.bootstrap_servers, topic, spec, produced, runs, workdir=workdir)
