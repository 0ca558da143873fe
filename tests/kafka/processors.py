"""Processors the Kafka tests load by name (``--processor processors:NAME``,
with this directory on PYTHONPATH)."""

from __future__ import annotations

import os
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


#: Environment variable naming the file :func:`counted` appends a line to per call.
CALLS_FILE = "LSMKV_TEST_PROCESSOR_CALLS"


def counted(record):
    """Transforms each value (``processed:`` + value; a delete stays a
    delete) and appends "<partition> <offset>" to the file named by
    $LSMKV_TEST_PROCESSOR_CALLS, so a test can count calls across processes."""
    path = os.environ.get(CALLS_FILE)
    if path:
        with open(path, "a") as f:
            f.write(f"{record.partition} {record.offset}\n")
    return record.key, None if record.value is None else b"processed:" + record.value
