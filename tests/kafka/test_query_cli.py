"""`lsmkv kafka query` prints keys and values as `lsmkv scan` does (one
lossless line an entry, plain, --hex and --json) and ends quietly when the
reader of its output goes away: a serving `lsmkv kafka load --serve`
instance over a topic of binary records, queried by the real command."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from lsmkv.kafka import StoreClient
from lsmkv.kafka.admin import ensure_topic
from lsmkv.kafka.tools.producer import producer_config
from lsmkv.terminal.textcodec import decode, encode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import ROOT, Instance, wait_for  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RECORDS = 6000


def _binary_table(bootstrap: str, topic: str) -> dict[bytes, bytes]:
    from confluent_kafka import Producer
    rng = random.Random(27)
    special = [b"tab\there", b"new\nline", b"back\\slash", b"\x00\xff", "café".encode(), b"\\x41"]
    producer = Producer(producer_config(bootstrap))  # murmur2: the partition a StoreClient asks
    table = {}
    for i in range(RECORDS):
        key = special[i] if i < len(special) else rng.randbytes(rng.randint(1, 12))
        value = rng.randbytes(rng.randint(0, 40)) + b"\n\t\\"
        producer.produce(topic, value, key)
        table[key] = value
    assert producer.flush(30) == 0
    return table


def _parsed(output: bytes, form: list[str]) -> list[tuple[bytes, bytes]]:
    to_bytes = bytes.fromhex if "--hex" in form else decode
    lines = output.decode("ascii").split("\n")
    assert lines[-1] == ""
    if "--json" in form:
        return [(to_bytes(o["key"]), to_bytes(o["value"])) for o in map(json.loads, lines[:-1])]
    return [tuple(map(to_bytes, line.split("\t"))) for line in lines[:-1]]


def test_kafka_query_prints_entries_as_lsmkv_scan_and_a_closed_pipe_ends_it_quietly(broker, name, tmp_path,
                                                                                     instances):
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    ensure_topic(bs, topic, 2)
    table = _binary_table(bs, topic)
    instances.append(Instance(bs, topic, group, str(tmp_path / "i0")))
    client = StoreClient(bs, group, timeout=30)

    def served() -> bool:
        try:
            return dict(client.scan()) == table
        except Exception:  # noqa: BLE001 - not serving yet
            return False
    wait_for(served, 120, "the instance serving the whole topic")

    query = [sys.executable, "-m", "lsmkv.cli", "kafka", "query", "--bootstrap-servers", bs, "--group", group]
    for form in ([], ["--hex"], ["--json"], ["--json", "--hex"]):
        proc = subprocess.run([*query, "--scan", *form], cwd=ROOT, capture_output=True, timeout=120)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
        assert proc.stdout.count(b"\n") == len(table)  # one line an entry, whatever the bytes
        assert _parsed(proc.stdout, form) == sorted(table.items())

    for key in (b"new\nline", b"\x00\xff", b"back\\slash"):
        proc = subprocess.run([*query, encode(key)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and decode(proc.stdout.removesuffix("\n")) == table[key], proc.stderr
    proc = subprocess.run([*query, "--json", "--hex", b"tab\there".hex()], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and bytes.fromhex(json.loads(proc.stdout)["value"]) == table[b"tab\there"]

    # `lsmkv kafka query --scan | head -1`: the reader goes away with most of
    # the ~1 MB of lines still to come.
    proc = subprocess.Popen([*query, "--scan"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == b"", err
    assert first == (encode(min(table)) + "\t" + encode(table[min(table)]) + "\n").encode()
