"""``lsmkv kafka demo`` end to end on the real embedded broker: it verifies
both engines and leaves nothing in the temporary directory unless told to
keep its stores (--keep), or given a directory of its own (--dir)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import btree
import lsmkv

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SMALL = ["--records", "2000", "--keys", "300", "--partitions", "2"]


def _demo(tmp: str, *args: str) -> subprocess.CompletedProcess:
    # TMPDIR: the demo's temporary directory (and the broker's log) go here, and nowhere else;
    # COLUMNS: rich wraps its output at 80 columns when not on a terminal.
    env = dict(os.environ, TMPDIR=tmp, COLUMNS="500")
    return subprocess.run([sys.executable, "-m", "lsmkv.cli", "kafka", "demo", *SMALL, *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_demo_removes_its_temporary_directory(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = _demo(str(tmp))
    assert done.returncode == 0, done.stderr
    assert "exactly as expected" in done.stdout and "removed (--keep keeps them)" in done.stdout
    assert os.listdir(tmp) == []


def test_the_demo_keeps_its_stores_when_asked(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = _demo(str(tmp), "--keep")
    assert done.returncode == 0, done.stderr
    [workdir] = os.listdir(tmp)
    assert workdir.startswith("lsmkv-kafka-demo-")
    assert sorted(os.listdir(tmp / workdir)) == ["btree.db", "lsm.db"]
    assert f"lsm store: {tmp / workdir / 'lsm.db'}" in done.stdout
    with lsmkv.open(str(tmp / workdir / "lsm.db"), read_only=True) as a, \
            btree.open(str(tmp / workdir / "btree.db"), read_only=True) as b:
        assert dict(a.scan()) == dict(b.scan()) != {}
    own = tmp_path / "own"
    done = _demo(str(tmp), "--dir", str(own))   # a directory of its own stays, --keep or not
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(own)) == ["btree.db", "lsm.db"]
    assert os.listdir(tmp) == [workdir]
