"""What a btree repair keeps in ``lost/N/``: what it gave up, not a copy of
every file it replaces. A damaged page's image is kept at its offset in a
sparse copy of ``btree.pages``; a log that dropped bytes is kept whole; a
repair that gives up nothing keeps nothing, so repeated repairs do not pile
up copies of the page file."""

from __future__ import annotations

import os
import sys

import btree
from btree.node import PAGE_LEAF
from btree.pager import LOG_FILE, PAGES_FILE
from btree.repair import repair_db
from lsmkv.base.set_aside import LOST_DIR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pagefile_helpers as helpers  # noqa: E402

PS = 512


def build(path: str, keys: int = 3000) -> dict[bytes, bytes]:
    model = {b"k%05d" % i: b"v%d-" % i * (i % 4 + 1) for i in range(keys)}
    with btree.open(path, page_size=PS) as db:
        with db.write_batch() as b:
            for k, v in model.items():
                b.put(k, v)
    return model


def pages_file(path: str) -> str:
    return os.path.join(path, PAGES_FILE)


def read(file: str) -> bytes:
    with open(file, "rb") as f:
        return f.read()


def allocated(root: str) -> int:
    """Bytes the files under ``root`` take on disk."""
    return sum(os.stat(os.path.join(d, name)).st_blocks * 512 for d, _, names in os.walk(root) for name in names)


def damage_a_leaf(path: str, which: int = 3) -> tuple[int, bytes]:
    """Damage the current image of one leaf; returns its slot and the damaged image."""
    leaves = helpers.pages_by_type(path)[PAGE_LEAF]
    slot = helpers.damage_page(path, leaves[len(leaves) // which], PS)
    return slot, helpers.read_slot(path, slot, PS)


def assert_holds_only(copy: str, size: int, images: dict[int, bytes]) -> None:
    """``copy`` is ``size`` bytes holding ``images`` (slot -> image) at their
    offsets and zeros everywhere else."""
    data = read(copy)
    assert len(data) == size
    expected = bytearray(size)
    for slot, image in images.items():
        expected[slot * PS:(slot + 1) * PS] = image
    assert data == expected


def test_healthy_repairs_keep_nothing(tmp_path):
    path = str(tmp_path / "db")
    model = build(path)
    for _ in range(3):
        report = repair_db(path)
        assert not report.data_lost and report.set_aside is None
        assert report.details["pages_set_aside_count"] == 0
    assert not os.path.exists(os.path.join(path, LOST_DIR))
    with btree.open(path) as db:
        assert dict(db.scan()) == model


def test_damaged_leaf_keeps_only_its_page(tmp_path):
    path = str(tmp_path / "db")
    build(path)
    size = os.path.getsize(pages_file(path))
    slot, image = damage_a_leaf(path)
    report = repair_db(path)
    assert report.data_lost
    assert report.details["pages_set_aside"] == [slot]
    assert sorted(os.listdir(report.set_aside)) == [PAGES_FILE]
    copy = os.path.join(report.set_aside, PAGES_FILE)
    assert_holds_only(copy, size, {slot: image})
    # A sparse copy: it takes about a page on disk, not the file's size.
    assert allocated(report.set_aside) < size // 4


def test_repeated_repairs_keep_each_loss_once(tmp_path):
    path = str(tmp_path / "db")
    build(path)
    first_size = os.path.getsize(pages_file(path))
    first_slot, first_image = damage_a_leaf(path)
    first = repair_db(path)
    assert first.set_aside == os.path.join(path, LOST_DIR, "1")
    for _ in range(2):  # nothing new given up: nothing new kept
        again = repair_db(path)
        assert not again.data_lost and again.set_aside is None
    assert os.listdir(os.path.join(path, LOST_DIR)) == ["1"]
    second_size = os.path.getsize(pages_file(path))
    second_slot, second_image = damage_a_leaf(path, which=2)
    second = repair_db(path)
    assert second.set_aside == os.path.join(path, LOST_DIR, "2")
    assert_holds_only(os.path.join(first.set_aside, PAGES_FILE), first_size, {first_slot: first_image})
    assert_holds_only(os.path.join(second.set_aside, PAGES_FILE), second_size, {second_slot: second_image})
    # Five repairs, two damaged pages: lost/ holds about two pages, not five page files.
    assert allocated(os.path.join(path, LOST_DIR)) < first_size // 4


def test_damaged_log_record_keeps_the_log_only(tmp_path):
    path = str(tmp_path / "db")
    build(path)
    with btree.open(path, page_size=PS) as db:
        with db.write_batch() as b:
            b.put(b"a", b"first")
        with db.write_batch() as b:
            b.put(b"b", b"second-and-damaged")
        db._simulate_crash()  # both batches only in the log
    log_path = os.path.join(path, LOG_FILE)
    data = bytearray(read(log_path))
    data[data.index(b"second-and-damaged")] ^= 0x55
    with open(log_path, "wb") as f:
        f.write(data)
    report = repair_db(path)
    assert report.data_lost and report.details["pages_set_aside_count"] == 0
    assert os.listdir(report.set_aside) == [LOG_FILE]
    assert read(os.path.join(report.set_aside, LOG_FILE)) == bytes(data)


def test_damaged_meta_page_is_kept(tmp_path):
    """A damaged meta page costs no keys here (the other copy and the log
    cover it), but its bytes are given up, so its image is kept."""
    path = str(tmp_path / "db")
    model = build(path)
    size = os.path.getsize(pages_file(path))
    helpers.damage_slot(path, 0, PS, offset=60)
    image = helpers.read_slot(path, 0, PS)
    report = repair_db(path)
    assert report.details["pages_set_aside"] == [0]
    assert_holds_only(os.path.join(report.set_aside, PAGES_FILE), size, {0: image})
    with btree.open(path) as db:
        assert dict(db.scan()) == model
