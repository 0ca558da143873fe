"""Staging directories of writes (lsmkv/spark/staging.py) and their owners
(owners.py): a directory whose driver process is gone is removed by the
next write's planning; one whose driver runs, runs on another host, or
has no owner yet is kept. Real processes, no Spark."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from lsmkv.spark import staging
from lsmkv.spark.owners import Owner, driver

pytestmark = pytest.mark.subprocess


def _dead_owner() -> Owner:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = Owner.of(child.pid)
    child.wait()
    return owner


def test_owner_alive_follows_the_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = Owner.of(child.pid)
        assert owner.alive() is True
        assert dataclasses.replace(owner, start=owner.start + 1).alive() is False  # the pid of another process
        assert dataclasses.replace(owner, host=owner.host + "-elsewhere").alive() is None
    finally:
        child.kill()
        child.wait()
    assert owner.alive() is False
    assert driver() == Owner.of(os.getpid())  # not a Spark worker: this process owns what it creates


def test_remove_stale_removes_only_the_directories_of_dead_drivers(tmp_path):
    store = str(tmp_path / "db")
    mine = staging.create(store, str(tmp_path))
    dead = staging.create(store, str(tmp_path))
    _dead_owner().write(dead)
    with open(os.path.join(dead, "task-1.sst"), "wb") as f:
        f.write(b"partial table" * 100)
    remote = staging.create(store, str(tmp_path))
    dataclasses.replace(Owner.read(remote), host="elsewhere").write(remote)
    ownerless = os.path.join(tmp_path, staging.prefix(store) + "new")
    os.mkdir(ownerless)
    interrupted = os.path.join(tmp_path, staging.prefix(store) + "old" + staging.REMOVING)
    os.mkdir(interrupted)
    other_store = staging.create(str(tmp_path / "other"), str(tmp_path))
    _dead_owner().write(other_store)

    assert sorted(staging.remove_stale(store, str(tmp_path))) == sorted([dead, interrupted])
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in (mine, remote, ownerless, other_store))
    staging.remove(mine)
    assert not os.path.exists(mine)
    staging.remove(mine)  # gone already: nothing to do
