"""Helpers of the scale-out tests: `lsmkv kafka load --serve` processes,
their status, a querying thread and the checks of what it saw."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from lsmkv.kafka import StoreClient
from lsmkv.kafka.tools.broker import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Instance:
    """One `lsmkv kafka load --serve` process."""

    def __init__(self, bootstrap: str, topic: str, group: str, db: str, port: int | None = None,
                 extra: tuple = ()) -> None:
        self.db = db
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(db + ".log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lsmkv.cli", "kafka", "load", "--bootstrap-servers", bootstrap, "--topic", topic,
             "--group", group, "--db", db, "--serve", f"127.0.0.1:{self.port}", "--quiet", "--json",
             "--commit-interval", "1", *extra],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def status(self) -> dict | None:
        try:
            with urllib.request.urlopen(self.url + "/v1/status", timeout=5) as resp:
                return json.loads(resp.read())
        except OSError:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.log.close()

    def output(self) -> str:
        with open(self.db + ".log", "rb") as f:
            return f.read().decode(errors="replace")[-3000:]


def wait_for(condition, timeout: float, what: str, every: float = 0.25, describe=None):
    """``condition()``'s first true value, asked every ``every`` s; past
    ``timeout`` s an AssertionError naming ``what``, with ``describe()``
    (the state that explains it) appended where given."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            detail = f"; {describe()}" if describe is not None else ""
            raise AssertionError(f"{what}: not within {timeout:.0f} s{detail}")
        time.sleep(every)


def describe_instances(instances: list[Instance]) -> str:
    """Each instance's process state, reported status and last output: what
    a wait on the group failed to see, for its failure message."""
    parts = []
    for i, inst in enumerate(instances):
        code = inst.proc.poll()
        st = inst.status()
        held_now = None if st is None else {"active": st.get("active"), "restoring": st.get("restoring")}
        parts.append(f"instance {i} ({inst.url}): {'running' if code is None else f'exited {code}'}, "
                     f"status {held_now}, output tail: {inst.output()[-800:]!r}")
    return "\n".join(parts)


def held(live: list[Instance]) -> dict[int, tuple[Instance, int | None, bool]]:
    """{partition: (instance, stored, restoring)} as the live instances report."""
    out = {}
    for inst in live:
        st = inst.status()
        for p, stored in (st or {}).get("active", {}).items():
            out[int(p)] = (inst, stored, int(p) in st["restoring"])
    return out


def table_of(records) -> dict[bytes, bytes]:
    table: dict[bytes, bytes] = {}
    for _, key, value in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


class Reader(threading.Thread):
    """Queries random keys through a StoreClient until stopped, recording
    every answer."""

    def __init__(self, bootstrap: str, group: str, keys: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.client = StoreClient(bootstrap, group, timeout=30)
        self.keys = keys
        self.answers: list = []
        self.errors: list = []
        self.stop = threading.Event()

    def run(self) -> None:
        rng = random.Random(7)
        while not self.stop.is_set():
            key = rng.choice(self.keys)
            try:
                self.answers.append(self.client.lookup(key))
            except Exception as exc:  # noqa: BLE001 - recorded, asserted on
                self.errors.append(repr(exc))
            time.sleep(0.01)


def check_answers(answers, truth) -> tuple[int, int]:
    """Every answer is a value its key had (or absence); answers not marked
    stale never go back in time for a key (by the offset of the record that
    wrote the value). Returns (answers, stale)."""
    written: dict[tuple[bytes, bytes], int] = {}
    for records in truth.values():
        for offset, key, value in records:
            if value is not None:
                written[(key, value)] = offset
    last: dict[bytes, int] = {}
    stale = 0
    for a in answers:
        assert a.value is None or (a.key, a.value) in written, f"{a.key!r}: {a.value!r:.60}, a value it never had"
        if a.stale:
            stale += 1
            continue
        if a.value is not None:
            offset = written[(a.key, a.value)]
            assert offset >= last.get(a.key, -1), f"{a.key!r} went back in time: {a}"
            last[a.key] = offset
    return len(answers), stale
