"""An instance SIGKILLed in the middle of an answer costs the reader
nothing: StoreClient takes a cut-off HTTP answer (headers sent, the body
never) as that owner being gone and asks the next claimant of the
partition, as it does an owner that refuses connections (real broker,
real `lsmkv kafka load --serve` process, a real SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lsmkv.kafka import StoreClient, WorkloadSpec
from lsmkv.kafka.scaleout.members import claims, members_topic
from lsmkv.kafka.tools.broker import free_port
from lsmkv.kafka.tools.producer import produce_workload

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instances import Instance, held, table_of, wait_for  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.crash, pytest.mark.slow]

# A process that accepts one request, sends the status line, the headers
# and a third of a 291-byte body, then SIGKILLs itself.
_DIES_MID_ANSWER = r"""
import os, signal, socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(8)
print("listening", flush=True)
conn, _ = listener.accept()
request = b""
while b"\r\n\r\n" not in request:
    request += conn.recv(4096)
conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 291\r\n\r\n" + b'{"value": "' * 9)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_owner_killed_mid_answer_is_passed_over_for_the_next_claimant(broker, name, tmp_path, instances,
                                                                         ground_truth):
    from confluent_kafka import Producer
    bs = broker.bootstrap_servers
    topic, group = name(), name("g")
    produce_workload(bs, topic, WorkloadSpec(records=300, keys=60, tombstone_ratio=0.0, seed=7), partitions=1)
    records = ground_truth(bs, topic)[0]
    expected = table_of(records)
    end = records[-1][0] + 1
    live = Instance(bs, topic, group, str(tmp_path / "live"))
    instances.append(live)
    wait_for(lambda: (lambda h: h if h.get(0, (None, None, True))[1:] == (end, False) else None)(held([live])), 90,
             "the instance holding partition 0 at its end")
    client = StoreClient(bs, group, timeout=30)
    announced = wait_for(lambda: next((m for m in client.members(refresh=True) if m.url == live.url), None), 30,
                         "the instance's announcement")

    port = free_port()
    dying = subprocess.Popen([sys.executable, "-c", _DIES_MID_ANSWER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert dying.stdout.readline().strip() == "listening"
        doomed_url = f"http://127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        key = sorted(expected)[len(expected) // 2]
        for attempt in range(20):
            # The doomed process claims partition 0 after the live instance
            # (the newest claim is asked first); the live one re-announces
            # every 2 s, so claim again until the client sees it first.
            doc = {**announced.raw, "url": doomed_url, "seq": attempt + 1, "time": time.time()}
            producer.produce(members_topic(group), key=doomed_url.encode(), value=json.dumps(doc).encode())
            assert producer.flush(10) == 0
            if claims(client.members(refresh=True))[0][0].url == doomed_url:
                break
        else:
            pytest.fail("the doomed process's claim never came first")
        got = client.lookup(key)
        assert dying.wait(10) == -signal.SIGKILL            # it was asked, and died answering
        assert (got.value, got.url, got.role, got.partition) == (expected[key], live.url, "active", 0)
        assert client.get(key) == expected[key]              # its stale claim: refused, passed over
        assert dict(client.scan()) == expected
    finally:
        if dying.poll() is None:
            dying.kill()
        dying.wait()
