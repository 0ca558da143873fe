"""Fixtures for the fault tests: a scratch directory on a RAM file system
when there is one. The fault file system decides what survives a simulated
power loss, so the disk's own fsync (milliseconds each, hundreds per
scenario) buys these tests nothing; the files and system calls stay real."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

FAST_DIR = "/dev/shm"


@pytest.fixture
def scratch(tmp_path):
    """A fresh directory, on /dev/shm if it is writable."""
    if os.path.isdir(FAST_DIR) and os.access(FAST_DIR, os.W_OK):
        path = tempfile.mkdtemp(prefix="lsmkv-faults-", dir=FAST_DIR)
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield str(tmp_path)


@pytest.fixture
def fresh_dir(scratch):
    """A function returning a new empty directory under ``scratch`` per call."""
    counter = iter(range(1 << 30))

    def make() -> str:
        path = os.path.join(scratch, f"run{next(counter)}")
        os.makedirs(path)
        return path
    return make
