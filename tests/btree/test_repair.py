"""`lsmkv repair` on the btree engine: damaged leaves, internal pages, the
root, the page map, both meta pages, overflow chains, the log and the
file's tail (real files, bytes flipped or cut), with the report checked
against the damage and the rebuilt tree checked against a model.

Pages are damaged where their bytes are: logical page ``p``'s current image
is in the slot the page map names (pagefile_helpers), and the file also
holds stale images of rewritten and freed pages in slots the map does not
name, which the repair must never take for current ones."""

from __future__ import annotations

import os
import sys

import pytest

import btree
from btree.node import PAGE_INTERNAL, PAGE_LEAF, PAGE_MAP, PAGE_MAPDIR, PAGE_OVERFLOW
from btree.pager import LOG_FILE, PAGES_FILE, page_slots
from btree.repair import repair_db
from lsmkv.base.errors import CorruptionError
from lsmkv.cli import EXIT_DATA_LOST, main

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pagefile_helpers as helpers  # noqa: E402

PS = 512


@pytest.fixture(autouse=True)
def keep_stale_images(monkeypatch):
    """flush() and close() compact the page file (moving pages down into the
    free slots, where stale images lie): the scenarios here need the stale
    images, so compaction is off, except in the random histories of odd
    seeds (random_history_and_damage)."""
    monkeypatch.setattr(btree.vacuum, "COMPACT_FREE", 0)


def build(path: str, *, log_tail: bool = True) -> dict[bytes, bytes]:
    """A btree with several levels, an overflow value, free slots holding
    stale leaf images (a range deleted and another rewritten after they were
    checkpointed), and batches only in the log. Returns the model."""
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


def pages_by_type(path: str) -> dict:
    return helpers.pages_by_type(path)


def damage_page(path: str, pg: int, offset: int = 100) -> int:
    """Damage the current image of logical page ``pg`` (in the slot the map names); returns the slot."""
    return helpers.damage_page(path, pg, PS, offset)


def damage_slot(path: str, slot: int, offset: int = 100) -> None:
    helpers.damage_slot(path, slot, PS, offset)


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
    # Nothing was given up, so nothing is set aside.
    assert report.set_aside is None and not os.path.exists(os.path.join(path, "lost"))


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


@pytest.mark.parametrize("which", ["map", "mapdir"])
def test_damaged_internal_page_and_page_map_keep_stale_leaves_out(db, which):
    """Without the page map, every slot is read: stale images of rewritten
    and freed leaves are found too; the newest image of each page, the newer
    leaves and the sibling links keep them out."""
    path, model = db
    pages = pages_by_type(path)
    assert any(ptype == PAGE_LEAF for _, _, ptype, _ in helpers.stale_images(path)), \
        "the scenario needs stale leaf images"
    damage_page(path, pages["root"][0], offset=40)
    damage_slot(path, pages[which][-1], offset=40)
    report = repair_db(path)
    assert any("page map unreadable" in n for n in report.notes), report.notes
    assert report.details["mode"] == "scan"
    assert report.details["stale_leaves_ignored"] > 0
    assert report.lost == [], [str(x) for x in report.lost]
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert dict(d.scan()) == model  # no deleted key, no old value


def test_both_meta_pages_damaged_scans_every_leaf(db):
    path, model = db
    damage_slot(path, 0, offset=40)
    damage_slot(path, 1, offset=40)
    with pytest.raises(CorruptionError, match="no valid meta page"):
        btree.open(path).close()
    report = repair_db(path)
    assert report.details["mode"] == "scan"
    assert report.details["stale_leaves_ignored"] > 0
    assert_repaired(path, model, report, DELETED)
    with btree.open(path) as d:
        assert not any(k in d for k in DELETED)


def build_rewritten(path: str) -> tuple[dict[bytes, bytes], set[bytes]]:
    """Format 4's stale images: keys checkpointed, then most of a range
    overwritten, every third key of it deleted and another range deleted
    whole, and checkpointed again: the rewritten leaves moved to new slots
    and their old images (old values, deleted keys) stay in slots the map
    no longer names. Returns (model, deleted keys)."""
    model: dict[bytes, bytes] = {}
    deleted: set[bytes] = set()
    with btree.open(path, page_size=PS) as d:
        for i in range(2000):
            d.put(b"k%05d" % i, b"old-%d" % i * 3)
            model[b"k%05d" % i] = b"old-%d" % i * 3
        d.flush()
        for i in range(400, 1400):
            k = b"k%05d" % i
            if i % 3 == 0:
                d.delete(k)
                del model[k]
                deleted.add(k)
            else:
                d.put(k, b"new-%d" % i)
                model[k] = b"new-%d" % i
        for i in range(1600, 1800):
            d.delete(b"k%05d" % i)
            del model[b"k%05d" % i]
            deleted.add(b"k%05d" % i)
        d.flush()
        d._simulate_crash()
    return model, deleted


def _stale_leaves_of_live_pages(path: str) -> list[tuple[int, int]]:
    """(slot, page) of stale leaf images of pages the tree still uses."""
    live = set(pages_by_type(path)[PAGE_LEAF])
    return [(slot, pg) for slot, pg, ptype, _ in helpers.stale_images(path) if ptype == PAGE_LEAF and pg in live]


@pytest.mark.parametrize("damage", ["internal", "root", "map", "mapdir", "meta pages"])
def test_stale_images_of_rewritten_leaves_never_come_back(tmp_path, damage):
    """Format 4: whatever the repair has to read without the tree (orphans
    of a damaged internal page, every slot without a map or a meta page),
    the stale images of rewritten leaves in free slots stay out: no deleted
    key and no old value returns, and nothing is lost."""
    path = str(tmp_path / "db")
    model, deleted = build_rewritten(path)
    pages = pages_by_type(path)
    stale = _stale_leaves_of_live_pages(path)
    assert len(stale) > 10, "the scenario needs stale images of leaves still in use"
    if damage == "internal":
        damage_page(path, next(p for p in pages[PAGE_INTERNAL] if p != pages["root"][0]), offset=40)
    elif damage == "root":
        damage_page(path, pages["root"][0], offset=40)
    elif damage in ("map", "mapdir"):
        damage_slot(path, pages[damage][0], offset=40)
    else:
        damage_slot(path, 0, offset=40)
        damage_slot(path, 1, offset=40)
    report = repair_db(path)
    assert report.details["mode"] == ("tree" if damage in ("internal", "root") else "scan")
    assert report.lost == [], [str(x) for x in report.lost]
    assert btree.check(path).ok
    with btree.open(path) as d:
        assert dict(d.scan()) == model
        assert not any(k in d for k in deleted)


@pytest.mark.parametrize("mode", ["tree", "scan"])
def test_damaged_leaf_with_a_stale_image_is_lost_not_rolled_back(tmp_path, mode):
    """A rewritten leaf whose current image is damaged while its previous
    image still verifies in a free slot: that old image (old values, keys
    deleted since) is not taken for it, in tree mode (the map names the
    damaged slot) or in scan mode (the damaged slot's header claims a newer
    image of the page); its keys are reported lost, exactly the keys between
    its neighbours."""
    path = str(tmp_path / "db")
    model, deleted = build_rewritten(path)
    pages = pages_by_type(path)
    stale = _stale_leaves_of_live_pages(path)
    _, victim = stale[len(stale) // 2]
    keys = _leaf_keys(path, victim)
    old_keys = helpers.stale_leaf_keys(path, victim, PS)
    assert any(k in deleted for k in old_keys), "the stale image should hold keys deleted since"
    damage_page(path, victim, offset=200)
    if mode == "scan":
        damage_slot(path, 0, offset=40)
        damage_slot(path, 1, offset=40)
    report = repair_db(path)
    assert report.details["mode"] == mode
    assert len(report.lost) == 1, [str(x) for x in report.lost]
    loss = report.lost[0]
    assert f"leaf page {victim}" in loss.what
    assert all(loss.covers(k) for k in keys + old_keys)
    assert not any(loss.covers(k) for k in model if k not in keys)
    assert_repaired(path, model, report, deleted)
    with btree.open(path) as d:
        contents = dict(d.scan())
    assert all(model[k] == v for k, v in contents.items())  # no old value, no deleted key, anywhere
    assert set(model) - set(contents) == {k for k in keys}


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


@pytest.mark.subprocess
def test_repair_refuses_while_a_writer_process_holds_the_lock(db, refused_while_held):
    path, _ = db
    refused_while_held("btree", path, repair_db)


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
    return helpers.leaf_keys(path, pg, PS)



@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_history_and_random_damage(tmp_path, seed):
    """Random writes, deletes and checkpoints, then a few random slots
    damaged (any slot: meta, map and directory pages and stale images
    included): whatever the repair keeps must be the latest value of each
    key outside its losses, and no deleted key may come back outside them."""
    random_history_and_damage(tmp_path, seed)


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(6, 200))
def test_random_history_and_random_damage_soak(tmp_path, seed):
    random_history_and_damage(tmp_path, seed)


def random_history_and_damage(tmp_path, seed: int) -> None:
    import random
    rng = random.Random(seed)
    path = str(tmp_path / "db")
    if seed % 2:
        btree.vacuum.COMPACT_FREE = 64  # compaction as by default (the fixture puts it back)
    model, ever = random_history(path, rng)
    slots = os.path.getsize(os.path.join(path, PAGES_FILE)) // PS
    for slot in rng.sample(range(slots), rng.randint(1, 4)):
        damage_slot(path, slot, offset=rng.randrange(4, PS))
    report = repair_db(path)
    assert_repaired(path, model, report, ever - set(model))


def random_history(path: str, rng) -> tuple[dict[bytes, bytes], set[bytes]]:
    """Random writes, deletes (some of whole ranges) and checkpoints, many
    of them (a small cache): (the model, every key ever written)."""
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
    return model, ever


def lonely_freed_leaves(path: str) -> list[int]:
    """Freed leaves with a verifying stale image none of whose sibling
    links names a page that any slot holds an image of."""
    live = page_slots(path)
    images = helpers.verifying_images(path)
    has_image = {pg for _, pg, ptype, _ in images if ptype not in (PAGE_MAP, PAGE_MAPDIR)}
    return [pg for slot, pg, ptype, _ in images
            if ptype == PAGE_LEAF and not (pg < len(live) and live[pg])
            and not any(link in has_image for link in helpers.leaf_links(path, slot, pg, PS))]


def freed_leaf_outliving_its_neighbours(path: str) -> tuple[dict[bytes, bytes], set[bytes]]:
    """A history leaving a freed leaf whose neighbours left no image, made
    step by step (a pool large enough that nothing is evicted, so pages are
    written only at the checkpoints here): one leaf rewritten, so its newest
    image lies in a slot above its neighbours'; a range around it deleted,
    freeing it and them; then new pages, checkpoint by checkpoint, until
    the lowest-first reuse of slots has overwritten every image of the
    neighbours but not that one. Slots go faster than page numbers (each
    checkpoint also writes map pages), so the neighbours' numbers are not
    yet reused. Returns (the model, every key ever written)."""
    model: dict[bytes, bytes] = {}
    with btree.open(path, page_size=PS, cache_size=64 << 20) as d:
        def put(key: bytes, value: bytes) -> None:
            d.put(key, value)
            model[key] = value
        for i in range(400):
            put(b"k%05d" % i, b"v" * 60)
        d.flush()
        for i in range(290, 294):
            put(b"k%05d" % i, b"w" * 60)
        d.flush()
        for i in range(100, 300):
            d.delete(b"k%05d" % i)
            del model[b"k%05d" % i]
        d.flush()
        for batch in range(80):
            for i in range(6):
                put(b"m%03d%02d" % (batch, i), b"x" * 60)
            d.flush()
            if lonely_freed_leaves(path):
                break
        ever = set(model) | {b"k%05d" % i for i in range(100, 300)}
        d._simulate_crash()
    return model, ever


def test_scan_mode_keeps_out_freed_leaves_whose_neighbours_left_no_image(tmp_path):
    """Format 4: a freed leaf's stale image can outlive every image of the
    pages it links to (their slots were reused). A link to a page no slot
    holds any image of (not even a damaged one) names a freed page, not a
    damaged one: the stale leaf is dropped, and no deleted key returns."""
    path = str(tmp_path / "db")
    model, ever = freed_leaf_outliving_its_neighbours(path)
    assert lonely_freed_leaves(path), "the scenario needs a freed leaf whose neighbours left no image"
    damage_slot(path, 0, offset=40)
    damage_slot(path, 1, offset=40)
    report = repair_db(path)
    assert report.details["mode"] == "scan"
    assert_repaired(path, model, report, ever - set(model))
    with btree.open(path) as d:
        assert all(model.get(k) == v for k, v in d.scan())  # nothing stale, even inside a loss
