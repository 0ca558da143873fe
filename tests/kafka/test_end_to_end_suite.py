"""`lsmkv bench --suite kafka-e2e`: the loader as a command, from start to
exit, beside a bare consumer, on the real broker. What it records, not how
fast anything is."""

from __future__ import annotations

import json

import pytest

from bench import cli

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_the_loader_and_the_bare_consumer_each_take_the_whole_topic_in_a_process_of_their_own(broker, tmp_path):
    out = tmp_path / "e2e"
    assert cli.main(["--suite", "kafka-e2e", "--bootstrap-servers", broker.bootstrap_servers, "--records", "3000",
                     "--keys", "300", "--partitions", "2", "--engines", "lsm,btree", "--quiet",
                     "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["error"] is None
    loads = {r["engine"]: r for r in doc["runs"] if r["workload"] == "kafka-load-end-to-end"}
    reads = [r for r in doc["runs"] if r["workload"] == "kafka-read-end-to-end"]
    assert set(loads) == {"lsm", "btree"} and {r["beside"] for r in reads} == {"lsm", "btree"}
    for r in [*loads.values(), *reads]:
        assert r["operations"] == 3000  # each read the topic to its end (the suite checks the count)
        assert r["peak_rss_mb"] > 10  # the child's own peak, not this process's
    for r in loads.values():
        # spawn to exit = start-up + the loader's own clock
        assert 0 < r["startup_s"] < r["elapsed_s"]
        assert r["loader_elapsed_s"] == pytest.approx(r["elapsed_s"] - r["startup_s"], abs=0.02)
    table = doc["tables"][0]
    assert [row[0] for row in table["rows"]] == ["lsm", "btree"]
    ratio = table["columns"].index("ratio")
    assert all(row[ratio].endswith("x") for row in table["rows"])
