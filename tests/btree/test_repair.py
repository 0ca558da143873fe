"""`lsmkv repair` on the btree engine: damaged leaves, internal pages, the
root, the free list, both meta pages, overflow chains, the log and the
file's tail (real files, bytes flipped or cut), with the report checked
against the damage and the rebuilt tree checked against a model."""

from __future__ import annotations

import os

import pytest

import btree
from btree.node import HEADER, PAGE_INTERNAL, PAGE_LEAF, PAGE_OVERFLOW
from btree.pager import LOG_FILE, PAGES_FILE, Pager
from btree.repair import repair_db
from lsmkv.cli import EXIT_DATA_LOST, main
from lsmkv.errors import CorruptionError, LockError
from lsmkv.fs import DEFAULT_FS

PS = 512


def build(path: str, *, log_tail: bool = True) -> dict[bytes, bytes]:
    """A btree with several levels, an overflow value, a free list holding
    stale leaf images (a range deleted after it was checkpointed), and
    batches only in the log. Returns the model."""
    model: dict[bytes, bytes] = {}
    with btree.open(path, page_size=PS) as db:
        for i in range(3000):
            k, v = b"k%05d" % i, b"v%d-" % i * (i % 4 + 1)
            db.put(k, v)
            model[k] = v
        db.put(b"k01234x", b"O" * 3000)  # an overflow chain
        model[b"k01234x"] = b"O" * 3000
        db.flush()  # these leaves reach the page file...
        for i in range(1000, 1600):
            db.delete(b"k%05d" % i)  # ...then their keys are deleted: freed pages keep stale images
            del model[b"k%05d" % i]
        for i in range(2000, 2100):
            db.put(b"k%05d" % i, b"rewritten-%d" % i)
            model[b"k%05d" % i] = b"rewritten-%d" % i
        db.flush()
        if log_tail:
            with db.write_batch() as b:
                b.put(b"k00007", b"from-the-log")
                b.delete(b"k00008")
            model[b"k00007"] = b"from-the-log"
            del model[b"k00008"]
            db._simulate_crash()  # the last batch only in the log
    return model


def pages_by_type(path: str) -> dict[int, list[int]]:
    """Page numbers of the current checkpoint's pages, by type."""
    pager = Pager(DEFAULT_FS, path, read_only=True)
    try:
        meta = pager.read_meta()
        pager.load_freelist(meta.freelist_head)
        out: dict[int, list[int]] = {}
        data = pager.file.read_at(0, meta.page_count * PS)
        for pg in range(2, meta.page_count):
            if pg in pager.free:
                continue
            out.setdefault(HEADER.unpack_from(data, pg * PS)[2], []).append(pg)
        out["root"] = [meta.root]  # type: ignore[index]
        out["freelist"] = list(pager.freelist_pages)  # type: ignore[index]
        return out
    finally:
        pager.close()


def damage_page(path: str, pg: int, offset: int = 100) -> None:
    with open(os.path.join(path, PAGES_FILE), "r+b") as f:
        f.seek(pg * PS + offset)
        byte = f.read(1)
        f.seek(pg * PS + offset)
        f.write(bytes([byte[0] ^ 0xA5]))


def assert_repaired(path: str, model: dict, report, deleted: set[bytes] = frozenset()) -> None:
    """It opens, passes check, every key outside the losses has its latest
    value, and no deleted key outside them returns."""
    check = btree.check(path)
    assert check.ok, check.problems
    with btree.open(path) as db:
        contents = dict(db.scan())
        for key, value in model.items():
            if not report.may_have_lost(key):
                assert contents.get(key) == value, key
                assert db.get(key) == value, key
        for key in contents:
            assert key in model or key in deleted, key
            if key in deleted:
                assert report.may_have_lost(key), f"deleted key {key!r} came back"
        assert db.check_invariants() == []


DELETED = {b"k%05d" % i for i in range(1000, 1600)} | {b"k00008"}


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "db")
    return path, build(path)


def test_healthy_database_loses_nothing(db):
    path, model = db
    report = repair_db(path)
    assert not report.data_lost and report.details["mode"] == "tree"
    assert report.details["log_batches_applied"] == 1
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert dict(d.scan()) == model
    # The old files are kept aside, never deleted.
    assert sorted(os.listdir(report.set_aside)) == [LOG_FILE, PAGES_FILE]


def test_damaged_leaf_loses_exactly_the_keys_between_its_neighbours(db):
    path, model = db
    pages = pages_by_type(path)
    victim = pages[PAGE_LEAF][len(pages[PAGE_LEAF]) // 3]
    with btree.open(path, read_only=True) as ro:
        before = dict(ro.scan())
    node_keys = _leaf_keys(path, victim)
    damage_page(path, victim)
    with pytest.raises(CorruptionError):
        with btree.open(path, read_only=True) as ro:
            list(ro.scan())
    report = repair_db(path)
    assert len(report.lost) == 1
    loss = report.lost[0]
    assert f"page {victim} failed verification" in loss.what and "checksum" in loss.what
    assert victim in report.details["pages_dropped"]
    # The lost range is the gap between the neighbouring surviving leaves:
    # it holds the damaged leaf's keys and no surviving key.
    assert all(loss.covers(k) for k in node_keys)
    assert not any(loss.covers(k) for k in before if k not in node_keys)
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert not any(k in d for k in node_keys if k != b"k00007")


@pytest.mark.parametrize("which", ["root", "internal"])
def test_damaged_internal_page_loses_nothing(db, which):
    path, model = db
    pages = pages_by_type(path)
    victim = pages["root"][0] if which == "root" else [p for p in pages[PAGE_INTERNAL]
                                                       if p != pages["root"][0]][0]
    damage_page(path, victim, offset=40)
    report = repair_db(path)
    assert report.lost == [], [str(x) for x in report.lost]
    assert report.details["pages_dropped"] == [victim]
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert dict(d.scan()) == model


def test_damaged_internal_page_and_free_list_keep_stale_leaves_out(db):
    """Without a free list, freed pages holding leaves of deleted keys are
    found too; the newer leaves and the sibling links keep them out."""
    path, model = db
    pages = pages_by_type(path)
    assert pages["freelist"], "the scenario needs a free list"
    damage_page(path, pages["root"][0], offset=40)
    for pg in pages["freelist"]:
        damage_page(path, pg, offset=40)
    report = repair_db(path)
    assert any("free list unreadable" in n for n in report.notes)
    assert report.details["stale_leaves_ignored"] > 0
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert not any(k in d for k in DELETED)  # not even inside a reported loss


def test_both_meta_pages_damaged_scans_every_leaf(db):
    path, model = db
    damage_page(path, 0, offset=40)
    damage_page(path, 1, offset=40)
    with pytest.raises(CorruptionError, match="no valid meta page"):
        btree.open(path).close()
    report = repair_db(path)
    assert report.details["mode"] == "scan"
    assert report.details["stale_leaves_ignored"] > 0
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert not any(k in d for k in DELETED)


def test_damaged_overflow_page_loses_that_value(db):
    path, model = db
    victim = pages_by_type(path)[PAGE_OVERFLOW][2]
    damage_page(path, victim)
    report = repair_db(path)
    assert len(report.lost) == 1
    loss = report.lost[0]
    assert (loss.first, loss.last) == (b"k01234x", b"k01234x") and f"page {victim}" in loss.what
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert d.get(b"k01234x") is None and d.get(b"k00999") == model[b"k00999"]


def test_damaged_log_keeps_the_batches_before_the_damage(tmp_path):
    path = str(tmp_path / "db")
    with btree.open(path, page_size=PS) as d:
        d.put(b"checkpointed", b"1")
        d.flush()
        d.put(b"a", b"1")
        d.put(b"b", b"damaged")
        d.put(b"c", b"3")
        d._simulate_crash()
    log_path = os.path.join(path, LOG_FILE)
    with open(log_path, "r+b") as f:
        data = f.read()
        f.seek(data.index(b"damaged"))
        f.write(b"DAMAGED")
    report = repair_db(path)
    assert len(report.lost) == 1 and not report.lost[0].keys_known and log_path in report.lost[0].what
    with btree.open(path) as d:
        assert dict(d.scan()) == {b"checkpointed": b"1", b"a": b"1"}
    assert btree.check(path).ok


def test_truncated_page_file(db):
    path, model = db
    pages_path = os.path.join(path, PAGES_FILE)
    size = os.path.getsize(pages_path)
    with open(pages_path, "r+b") as f:
        f.truncate(size - 6 * PS)
    report = repair_db(path)
    assert report.data_lost
    assert_repaired(path, model, report, DELETED)


def test_repair_refuses_while_a_writer_process_holds_the_lock(db, writer_process, directory_bytes):
    path, _ = db
    with writer_process("btree", path):
        during = directory_bytes(path)
        with pytest.raises(LockError, match="open for writing in another process"):
            repair_db(path)
        assert directory_bytes(path) == during


def test_cli_repair_detects_the_btree_and_sets_the_exit_code(db, capsys):
    path, model = db
    assert main(["repair", path]) == 0
    out = capsys.readouterr().out
    assert "(btree)" in out and "nothing lost" in out
    damage_page(path, pages_by_type(path)[PAGE_LEAF][5])
    assert main(["repair", path]) == EXIT_DATA_LOST
    out = capsys.readouterr().out
    assert out.count("LOST: ") == 1 and "failed verification" in out


def _leaf_keys(path: str, pg: int) -> list[bytes]:
    from btree.node import decode_node
    with open(os.path.join(path, PAGES_FILE), "rb") as f:
        f.seek(pg * PS)
        return decode_node(f.read(PS), pg, PS, "p").keys



@pytest.mark.parametrize("seed", range(6))
def test_random_history_and_random_damage(tmp_path, seed):
    """Random writes, deletes and checkpoints, then a few random pages
    damaged (any page, meta and free-list pages included): whatever the
    repair keeps must be the latest value of each key outside its losses,
    and no deleted key may come back outside them."""
    random_history_and_damage(tmp_path, seed)


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(6, 200))
def test_random_history_and_random_damage_soak(tmp_path, seed):
    random_history_and_damage(tmp_path, seed)


def random_history_and_damage(tmp_path, seed: int) -> None:
    import random
    rng = random.Random(seed)
    path = str(tmp_path / "db")
    model: dict[bytes, bytes] = {}
    ever: set[bytes] = set()
    with btree.open(path, page_size=PS, cache_size=64 * PS) as d:
        for step in range(rng.randint(3, 6)):
            for _ in range(rng.randint(200, 1500)):
                key = b"k%05d" % rng.randrange(4000)
                if rng.random() < 0.3:
                    d.delete(key)
                    model.pop(key, None)
                else:
                    value = rng.randbytes(rng.choice([3, 20, 60, 700]))
                    d.put(key, value)
                    model[key] = value
                ever.add(key)
            if rng.random() < 0.3:  # delete a whole range: merges free leaves
                lo = rng.randrange(4000)
                for i in range(lo, lo + 400):
                    d.delete(b"k%05d" % i)
                    model.pop(b"k%05d" % i, None)
            d.flush()
        d._simulate_crash()
    pages = os.path.getsize(os.path.join(path, PAGES_FILE)) // PS
    for pg in rng.sample(range(pages), rng.randint(1, 4)):
        damage_page(path, pg, offset=rng.randrange(4, PS))
    report = repair_db(path)
    assert_repaired(path, model, report, ever - set(model))
