"""Processors the Kafka tests load by name (``--processor processors:NAME``,
with this directory on PYTHONPATH)."""

from __future__ import annotations

import random
import time


def slow(record):
    """Stores the record as it is, after up to 2 ms of simulated I/O."""
    time.sleep(random.random() * 0.002)
    return record.key, record.value


def poison(record):
    """Raises for records whose value starts with POISON; stores the rest."""
    if record.value is not None and record.value.startswith(b"POISON"):
        raise ValueError(f"poison record at offset {record.offset}")
    return record.key, record.value
