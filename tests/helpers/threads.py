"""Running test threads: workers that finish on their own beside
background threads that run until told to stop."""

from __future__ import annotations

import threading


def run_until_done(workers: list[threading.Thread], background: list[threading.Thread],
                   stop: threading.Event) -> None:
    """Start the background threads, then the workers; once each worker has
    finished, set ``stop`` and wait for the background threads to end."""
    for t in background + workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    for t in background:
        t.join()
