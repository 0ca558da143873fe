"""Threads calling one operation over and over for a fixed time, each call timed.

What the multi-threaded suites share (group_commit, transactions): every
thread makes its operation (``make_op(t)``, in the thread: a connection
of its own, say), all start together at a barrier, and each calls its
operation until ``seconds`` have passed, recording each call's latency.
The first error of any thread stops the others and is raised.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


def run_timed_threads(make_op: Callable[[int], Callable[[], object]], threads: int, seconds: float,
                      name: str) -> tuple[list[int], float]:
    """Run ``threads`` threads for ``seconds`` (see the module docstring);
    return every call's latency in ns and the elapsed seconds."""
    gate = threading.Barrier(threads + 1)
    stop = threading.Event()
    latencies: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        clock, mine = time.perf_counter_ns, latencies[t]
        op = None
        try:
            op = make_op(t)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller
            errors.append(exc)
        gate.wait()
        try:
            while op is not None and not stop.is_set() and not errors:
                began = clock()
                op()
                mine.append(clock() - began)
        except BaseException as exc:  # noqa: BLE001 - raised by the caller
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(t,), name=f"{name}-{t}") for t in range(threads)]
    for t in pool:
        t.start()
    gate.wait()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return [x for mine in latencies for x in mine], elapsed
