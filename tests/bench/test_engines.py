"""The adapter contract, on every engine that can run here; one-line hints for the others."""

from __future__ import annotations

import sys

import pytest

from bench import engines
from bench.engines import EngineSettings, EngineUnavailable, availability, get_adapter

AVAILABLE = [name for name in engines.ENGINES if availability(name) is None]


@pytest.mark.parametrize("name", AVAILABLE)
@pytest.mark.parametrize("sync", [False, True])
def test_adapter_contract(tmp_path, name, sync):
    cls = get_adapter(name)
    if sync and name == "dbm":
        with pytest.raises(EngineUnavailable, match="no fsync"):
            cls(str(tmp_path / name), EngineSettings(sync=True))
        return
    db = cls(str(tmp_path / name), EngineSettings(sync=sync, cache_size=1 << 20))
    try:
        keys = [b"k%03d" % i for i in range(50)]
        db.write_batch([(k, b"batch-" + k) for k in keys[:25]])
        for k in keys[25:]:
            db.put(k, b"v-" + k)
        assert db.get(b"k010") == b"batch-k010"
        assert db.get(b"k030") == b"v-k030"
        assert db.get(b"nope") is None
        db.put(b"k010", b"new")
        assert db.get(b"k010") == b"new"
        db.delete(b"k011")
        assert db.get(b"k011") is None
        if cls.ordered:
            assert db.scan(b"k045", 10) == 5          # k045..k049
            assert db.scan(b"k0105", 3) == 3          # starts at the next key, k011 is deleted
            forward = [k for k, _ in db.iterate()]
            assert forward == sorted(set(keys) - {b"k011"})
            assert [k for k, _ in db.iterate(reverse=True)] == forward[::-1]
        else:  # every live pair once, in no particular order
            live = sorted((k, db.get(k)) for k in set(keys) - {b"k011"})
            assert sorted(db.iterate()) == live
            assert sorted(db.iterate(reverse=True)) == live
        db.flush()
        assert isinstance(db.stats(), dict)
    finally:
        db.close()
    # Reopening finds the data (the adapter really wrote to its directory).
    db = cls(str(tmp_path / name), EngineSettings())
    try:
        assert db.get(b"k030") == b"v-k030"
    finally:
        db.close()


def test_settings_reach_the_engine(tmp_path):
    if "sqlite" not in AVAILABLE:
        pytest.skip("sqlite3 missing")
    db = get_adapter("sqlite")(str(tmp_path / "s"), EngineSettings(sync=True, cache_size=4 << 20))
    try:
        assert db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert db.conn.execute("PRAGMA cache_size").fetchone()[0] == -4096
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_lmdb_says_it_has_no_cache(tmp_path):
    if "lmdb" not in AVAILABLE:
        pytest.skip("lmdb missing")
    db = get_adapter("lmdb")(str(tmp_path / "l"), EngineSettings(cache_size=1 << 20))
    try:
        assert any("no cache of its own" in n for n in db.notes)
    finally:
        db.close()


@pytest.mark.parametrize("name,module", [("rocksdb", "rocksdict"), ("leveldb", "plyvel"), ("lmdb", "lmdb")])
def test_missing_library_is_a_one_line_hint(monkeypatch, name, module):
    monkeypatch.setitem(sys.modules, module, None)  # makes the import fail
    assert availability(name) == f"{name}: not installed; pip install 'lsmkv[references]'"


def test_engine_without_open_is_reported_unavailable(monkeypatch):
    import types
    monkeypatch.setitem(sys.modules, "btree", types.ModuleType("btree"))
    reason = availability("btree")
    assert reason is not None and reason.startswith("btree: btree.open() does not exist")
    assert "\n" not in reason


def test_unknown_engine():
    with pytest.raises(EngineUnavailable, match="no such engine; choose from lsm, btree, sqlite"):
        get_adapter("oracle")


def test_engine_options_pass_through(tmp_path):
    if "lsm" not in AVAILABLE:
        pytest.skip("lsm engine not available")
    db = get_adapter("lsm")(str(tmp_path / "lsm"), EngineSettings(cache_size=123456,
                                                                  options={"write_buffer_size": 65536}))
    try:
        assert db.applied == {"write_buffer_size": 65536, "block_cache_size": 123456}
    finally:
        db.close()


def test_engines_say_which_workloads_they_skip_and_why(monkeypatch):
    from bench.config import BenchConfig
    from bench.workloads import make_workloads
    by_name = {w.name: w for w in make_workloads(BenchConfig())}
    dbm = get_adapter("dbm")
    assert "keeps no key order" in dbm.skip_reason(by_name["seekrandom"])
    assert get_adapter("lsm").skip_reason(by_name["seekrandom"]) is None
    assert dbm.skip_reason(by_name["readrandom"]) is None
    monkeypatch.setattr(dbm, "module_name", classmethod(lambda cls: "dbm.dumb"))
    assert "rewrites its whole index file on every delete" in dbm.skip_reason(by_name["deleterandom"])
    monkeypatch.setattr(dbm, "module_name", classmethod(lambda cls: "dbm.sqlite3"))
    assert dbm.skip_reason(by_name["deleterandom"]) is None


def test_reference_options_pass_through(tmp_path):
    """The engine suites configure RocksDB and LevelDB through settings.options."""
    if "rocksdb" in AVAILABLE:
        db = get_adapter("rocksdb")(str(tmp_path / "rocks"), EngineSettings(options={
            "write_buffer_size": 1 << 20, "max_write_buffer_number": 3, "compression": "zstd",
            "statistics": False, "bloom_bits_per_key": 8}))
        try:
            assert db.applied["write_buffer_size"] == 1 << 20 and db.applied["max_write_buffer_number"] == 3
            assert db.applied["compression"] == "zstd" and db.applied["statistics"] is False
            assert db.applied["bloom_bits_per_key"] == 8
            db.put(b"k", b"v")
            assert db.get(b"k") == b"v" and db.stats()["engine"] == "rocksdb"
        finally:
            db.close()
        with pytest.raises(ValueError, match="no option 'no_such_thing'"):
            get_adapter("rocksdb")(str(tmp_path / "rocks2"), EngineSettings(options={"no_such_thing": 1}))
    if "leveldb" in AVAILABLE:
        db = get_adapter("leveldb")(str(tmp_path / "level"), EngineSettings(
            cache_size=1 << 20, options={"write_buffer_size": 1 << 20, "compression": None}))
        try:
            assert db.applied["write_buffer_size"] == 1 << 20 and db.applied["compression"] is None
            assert db.applied["lru_cache_size"] == 1 << 20
        finally:
            db.close()
