"""Metadata entries (batch.set_meta, db.get_meta, db.meta) on both engines:
a namespace of its own, written atomically with a batch's data, kept across
flushes, checkpoints, reopens, read-only opens and repairs."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import btree
import lsmkv

ENGINES = {
    "lsm": lambda path, **kw: lsmkv.open(path, write_buffer_size=8192, **kw),
    "btree": lambda path, **kw: btree.open(path, page_size=512, **kw),
}
MODULE = {"lsm": "lsmkv", "btree": "btree"}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_metadata_is_kept_beside_the_data_and_never_seen_as_data(tmp_path, engine):
    path = str(tmp_path / "db")
    rng = random.Random(4)
    model: dict[str, bytes] = {}
    db = ENGINES[engine](path)
    try:
        for i in range(300):
            with db.write_batch() as b:
                b.put(b"k%04d" % i, b"v" * 40)
                if i % 3 == 0:
                    name = f"offsets/p{rng.randrange(5)}"
                    model[name] = b"%d" % i + b"x" * rng.randrange(0, 3000)
                    b.set_meta(name, model[name])
            if i % 97 == 0:
                db.flush()
        with db.write_batch() as b:  # a batch of metadata only
            b.set_meta("only", b"")
        model["only"] = b""
        assert db.meta() == dict(sorted(model.items()))
        assert all(db.get_meta(n) == v for n, v in model.items()) and db.get_meta("absent") is None
        assert len(db) == 300 and all(k.startswith(b"k") for k in db)
        assert set(db.stats()["meta"]) == set(model)
    finally:
        db.close()
    for options in ({}, {"read_only": True}):
        with ENGINES[engine](path, **options) as db:
            assert db.meta() == dict(sorted(model.items()))
    report = (lsmkv.repair if engine == "lsm" else btree.repair)(path)
    assert not report.data_lost
    with ENGINES[engine](path) as db:
        assert db.meta() == dict(sorted(model.items())) and len(db) == 300


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_bad_metadata_arguments_change_nothing(tmp_path, engine):
    with ENGINES[engine](str(tmp_path / "db")) as db:
        for name, value, error in ((b"bytes", b"v", TypeError), ("", b"v", ValueError), ("x" * 256, b"v", ValueError),
                                   ("n", "text", TypeError), ("n", b"v" * (1024 * 1024 + 1), ValueError)):
            with pytest.raises(error):
                with db.write_batch() as b:
                    b.put(b"k", b"v")
                    b.set_meta(name, value)
        assert db.meta() == {} and db.get(b"k") is None
        with pytest.raises(TypeError):
            db.get_meta(b"bytes")


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_sigkill_never_separates_data_from_its_metadata(tmp_path, engine):
    path = str(tmp_path / "db")
    code = textwrap.dedent(f"""
        import {MODULE[engine]} as m
        db = m.open({path!r}{', write_buffer_size=16384' if engine == 'lsm' else ', page_size=512'})
        i = int(db.get_meta("done") or b"0")
        print("ready", flush=True)
        while True:
            i += 1
            with db.write_batch() as b:
                for j in range(5):
                    b.put(b"k%07d-%d" % (i, j), b"v" * 50)
                b.set_meta("done", b"%d" % i)
    """)
    for round_ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.3 + 0.2 * round_)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with ENGINES[engine](path, read_only=True) as db:
            done = int(db.get_meta("done"))
            assert done > 0
            keys = list(db)
            # Exactly the batches up to the one the metadata names, each whole.
            assert keys == sorted(b"k%07d-%d" % (i, j) for i in range(1, done + 1) for j in range(5))


def test_stats_show_short_text_values_and_the_size_of_the_rest():
    from lsmkv.base.meta import describe_meta
    shown = describe_meta({"kafka:t:0": b"2548", "blob": b"\x00\x01", "long": b"x" * 65, "empty": b""})
    assert shown == {"blob": "<2 bytes>", "empty": "", "kafka:t:0": "2548", "long": "<65 bytes>"}
