"""`lsmkv repair` keeps every data block of a damaged table that verifies.

Real table files are damaged in place (8 bytes changed in a data block, the
index, filter or properties block, the footer, and combinations), then the
repaired database is compared with what was written: every key of the good
blocks has its newest value, nothing of a damaged block comes back as data,
and the report's ranges cover exactly the keys that were lost. Stores with
several levels check that salvaged older versions never win over newer ones
and that tombstones keep their effect.
"""

from __future__ import annotations

import os
import random
import sys
import shutil

import pytest

import lsmkv
from lsmkv.cli import EXIT_DATA_LOST, main
from lsmkv.lsm.check import check_db
from lsmkv.lsm.repair import repair_db
from lsmkv.lsm.table.format import FOOTER_SIZE, Footer
from lsmkv.lsm.table.reader import TableReader
from lsmkv.lsm.version import VersionSet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_table_format_1 import rewrite_as_format_1  # noqa: E402

OPTS = dict(block_size=512, disable_auto_compactions=True, write_buffer_size=1 << 20)
KEYS = 3000


def key(i: int) -> bytes:
    return b"key%06d" % i


def levels_of(path: str) -> list[list]:
    vs = VersionSet(path, lsmkv.base.fs.DEFAULT_FS)
    vs.recover()
    vs.close()
    return vs.current.levels


def tables(path: str) -> list:
    """The tables of the store, in read order (level 0 newest first, then by level)."""
    return [meta for files in levels_of(path) for meta in files]


def table_file(path: str, meta) -> str:
    return os.path.join(path, "%06d.sst" % meta.number)


class Layout:
    """Where a table's blocks lie and which keys each data block holds."""

    def __init__(self, file: str) -> None:
        reader = TableReader(lsmkv.base.fs.DEFAULT_FS, file, 0, cache=None)
        try:
            self.offsets = list(reader.index_offsets)
            self.sizes = list(reader.index_sizes)
            self.last_keys = list(reader.index_keys)
            self.keys = [list(reader.block(i).keys) for i in range(reader.num_blocks)]
        finally:
            reader.close()
        with open(file, "rb") as f:
            data = f.read()
        self.size = len(data)
        self.footer = Footer.decode(data[-FOOTER_SIZE:], file, len(data))

    def middle_of(self, handle: tuple[int, int]) -> int:
        return handle[0] + handle[1] // 2

    def block(self, i: int) -> int:
        return self.middle_of((self.offsets[i], self.sizes[i]))


def damage(file: str, offset: int, length: int = 8) -> None:
    """Change ``length`` bytes at ``offset`` (every byte differs afterwards)."""
    with open(file, "r+b") as f:
        f.seek(offset)
        old = f.read(length)
        f.seek(offset)
        f.write(bytes(b ^ 0xA5 for b in old))


def one_table_store(path: str, compression: str | None) -> dict[bytes, bytes]:
    """KEYS keys in one table at the bottom (one version each), a few hundred data blocks."""
    model = {key(i): b"value-%d-" % i * 3 for i in range(KEYS)}
    with lsmkv.open(path, compression=compression, **OPTS) as db:
        with db.write_batch() as b:
            for k, v in model.items():
                b.put(k, v)
        db.compact_range()
    assert len(tables(path)) == 1
    return model


@pytest.fixture(scope="module")
def one_table(tmp_path_factory):
    """``one_table(compression, dest)``: a copy at ``dest`` of a one-table
    store built once per module; returns the model."""
    built: dict = {}

    def copy(compression: str | None, dest: str) -> dict[bytes, bytes]:
        if compression not in built:
            path = str(tmp_path_factory.mktemp("pristine") / "db")
            built[compression] = (path, one_table_store(path, compression))
        src, model = built[compression]
        shutil.copytree(src, dest)
        return model

    return copy


#: What each case damages: data blocks by index (-1: the last), and the
#: metadata blocks by name. The blocks expected lost are the data blocks named.
CASES = {
    "data block": (["mid"], []),
    "first data block": ([0], []),
    "last data block": ([-1], []),
    "two adjacent data blocks": (["mid", "mid+1"], []),
    "index block": ([], ["index"]),
    "filter block": ([], ["filter"]),
    "properties block": ([], ["properties"]),
    "footer": ([], ["footer"]),
    "footer and index block": ([], ["footer", "index"]),
    "footer, index and properties blocks": ([], ["footer", "index", "properties"]),
    "index block and a data block": (["mid"], ["index"]),
    "index block and two adjacent data blocks": (["mid", "mid+1"], ["index"]),
    "index block, first and last data blocks": ([0, -1], ["index"]),
    "footer, index, properties and last data block": ([-1], ["footer", "index", "properties"]),
    "footer, index, properties and first data block": ([0], ["footer", "index", "properties"]),
}


@pytest.mark.parametrize("compression", ["zstd", None])
@pytest.mark.parametrize("case", list(CASES))
def test_damaged_table_keeps_every_block_that_verifies(tmp_path, one_table, case, compression):
    path = str(tmp_path / "db")
    model = one_table(compression, path)
    file = table_file(path, tables(path)[-1])
    layout = Layout(file)
    n = len(layout.offsets)
    blocks, metadata = CASES[case]
    lost_blocks = sorted({n // 2 if b == "mid" else n // 2 + 1 if b == "mid+1" else b % n for b in blocks})
    for i in lost_blocks:
        damage(file, layout.block(i))
    footer = layout.footer
    for name in metadata:
        damage(file, layout.size - 40 if name == "footer" else layout.middle_of(getattr(footer, name)))
    with open(file, "rb") as f:
        damaged_bytes = f.read()
    assert not check_db(path).ok

    report = repair_db(path)

    lost_keys = {k for i in lost_blocks for k in layout.keys[i]}
    assert lost_keys or not lost_blocks
    with lsmkv.open(path) as db:
        # Every key of the good blocks with its value; nothing of a damaged block.
        assert dict(db.scan()) == {k: v for k, v in model.items() if k not in lost_keys}
        for k in lost_keys:
            assert db.get(k) is None
    # The report's ranges cover exactly the lost keys. Found without the
    # index, a damaged run ends at the first key of the next block that
    # verifies, and that key is excluded only when the properties block
    # says the table holds one version per key.
    cover = set(lost_keys)
    if "index" in metadata and "properties" in metadata:
        cover |= {layout.keys[i + 1][0] for i in lost_blocks if i + 1 < n and i + 1 not in lost_blocks}
    assert {k for k in model if report.may_have_lost(k)} == cover
    assert report.data_lost == bool(lost_blocks)
    assert all(file in loss.what for loss in report.lost)
    if metadata:
        assert any(file in note and "damaged" in note for note in report.notes)
    assert report.details["table_entries_salvaged"] == len(model) - len(lost_keys)
    # The damaged file, as it was, in lost/N.
    with open(os.path.join(report.set_aside, os.path.basename(file)), "rb") as f:
        assert f.read() == damaged_bytes
    assert check_db(path).ok


@pytest.mark.parametrize("compression", ["zstd", None])
def test_each_damaged_block_is_reported_with_its_range_from_the_index(tmp_path, one_table, compression):
    """Two damaged blocks apart: two losses, each naming its block and the
    keys after the block before it through its own last key."""
    path = str(tmp_path / "db")
    model = one_table(compression, path)
    file = table_file(path, tables(path)[-1])
    layout = Layout(file)
    victims = [3, len(layout.offsets) - 5]
    for i in victims:
        damage(file, layout.block(i))
    report = repair_db(path)
    assert len(report.lost) == 2
    for loss, i in zip(report.lost, victims):
        assert f"data block {i} of {len(layout.offsets)}" in loss.what
        assert (loss.first, loss.first_inclusive) == (layout.last_keys[i - 1], False)
        assert (loss.last, loss.last_inclusive) == (layout.last_keys[i], True)
        assert {k for k in model if loss.covers(k)} == set(layout.keys[i])


def test_cli_prints_the_lost_block_and_its_keys(tmp_path, one_table, capsys):
    path = str(tmp_path / "db")
    one_table("zstd", path)
    file = table_file(path, tables(path)[-1])
    layout = Layout(file)
    i = len(layout.offsets) // 2
    damage(file, layout.block(i))
    assert main(["repair", path]) == EXIT_DATA_LOST
    out = capsys.readouterr().out
    lost = [line for line in out.splitlines() if line.startswith("LOST: ")]
    assert len(lost) == 1
    assert f"data block {i} " in lost[0] and file in lost[0]
    assert f"keys ({layout.last_keys[i - 1]!r}, {layout.last_keys[i]!r}]" in lost[0]
    assert f"{len(layout.keys[i])} entries" in lost[0]
    assert f"kept {KEYS - len(layout.keys[i])} of {KEYS} entries" in out
    assert os.path.join(path, "lost", "1") in out


# -- several levels: salvaged older versions and tombstones ------------------------

def layered_store(path: str, compacted: bool) -> tuple[dict[bytes, bytes | None], dict[bytes, bytes]]:
    """Old values of every key in one table -- compacted to the bottom
    (sequence 0) or flushed to level 0 (sequence numbers above 0, so that
    only the sequence numbers order its versions and the newer table's) --
    then one level-0 table of overwrites and tombstones over them. Returns
    the model (None: deleted) and the old values."""
    old = {key(i): b"old-%d" % i for i in range(KEYS)}
    model: dict[bytes, bytes | None] = dict(old)
    with lsmkv.open(path, compression=None, **OPTS) as db:
        with db.write_batch() as b:
            for k, v in old.items():
                b.put(k, v)
        if compacted:
            db.compact_range()
        else:
            db.flush()
        with db.write_batch() as b:
            for i in range(0, KEYS, 3):
                b.put(key(i), b"new-%d" % i)
                model[key(i)] = b"new-%d" % i
            for i in range(1, KEYS, 5):
                b.delete(key(i))
                model[key(i)] = None
        db.flush()
    levels = levels_of(path)
    assert len(levels[0]) == (1 if compacted else 2) and len(tables(path)) == 2
    return model, old


def live(model: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    return {k: v for k, v in model.items() if v is not None}


@pytest.mark.parametrize("compacted", [True, False])
def test_damaged_older_table_never_wins_over_newer_versions_or_tombstones(tmp_path, compacted):
    path = str(tmp_path / "db")
    model, _ = layered_store(path, compacted)
    file = table_file(path, tables(path)[-1])
    layout = Layout(file)
    i = len(layout.offsets) // 2
    damage(file, layout.block(i))
    report = repair_db(path)
    in_block = set(layout.keys[i])
    # Lost: the keys of the damaged block that nothing newer wrote over.
    untouched = {k for k in in_block if model[k] == b"old-%d" % int(k[3:])}
    assert untouched and untouched != in_block
    with lsmkv.open(path) as db:
        # Everything else exactly as written: overwrites and tombstones of the
        # level-0 table win over the salvaged old versions (all at sequence 0).
        assert dict(db.scan()) == {k: v for k, v in live(model).items() if k not in untouched}
    assert {k for k in model if report.may_have_lost(k)} == in_block
    assert check_db(path).ok


@pytest.mark.parametrize("compacted", [True, False])
def test_damaged_newer_table_falls_back_to_older_values_only_in_its_range(tmp_path, compacted):
    """A damaged block of the newer table (overwrites and tombstones): its
    keys fall back to the older table's values, inside the reported range;
    the tombstones of its other blocks keep their keys deleted."""
    path = str(tmp_path / "db")
    model, old = layered_store(path, compacted)
    file = table_file(path, levels_of(path)[0][0])
    layout = Layout(file)
    i = len(layout.offsets) // 2
    damage(file, layout.block(i))
    report = repair_db(path)
    in_block = set(layout.keys[i])
    assert any(model[k] is None for k in in_block) and any(model[k] is not None for k in in_block)
    expected = dict(model)
    for k in in_block:
        expected[k] = old[k]  # the newer entry is gone; the older table's value is what remains
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == live(expected)
    # The range reported: after the block before it, through its last key.
    lo, hi = layout.last_keys[i - 1], layout.last_keys[i]
    assert {k for k in model if report.may_have_lost(k)} == {k for k in model if lo < k <= hi}
    assert in_block <= {k for k in model if lo < k <= hi}
    deleted_elsewhere = [k for k, v in model.items() if v is None and k not in in_block]
    assert deleted_elsewhere
    with lsmkv.open(path) as db:
        assert all(db.get(k) is None for k in deleted_elsewhere)


@pytest.mark.parametrize("damaged", ["older versions only", "newest version"])
def test_versions_of_one_key_across_blocks(tmp_path, damaged):
    """A level-0 table holding many versions of one key, spread over several
    blocks. A block of only older versions costs nothing. The block with the
    newest version loses that key: the newest version salvaged from the next
    block comes back, inside the reported range."""
    path = str(tmp_path / "db")
    with lsmkv.open(path, compression=None, **OPTS) as db:
        db.put(b"a", b"a")
        snapshots = []
        for v in range(200):
            db.put(b"hot", b"version-%03d" % v)
            snapshots.append(db.snapshot())  # keeps this version in the flush
        db.put(b"z", b"z")
        db.flush()
        for snapshot in snapshots:
            snapshot.close()
    file = table_file(path, levels_of(path)[0][0])
    layout = Layout(file)
    hot_only = [i for i, keys in enumerate(layout.keys) if set(keys) == {b"hot"}]
    assert len(hot_only) >= 3 and layout.keys[0][:2] == [b"a", b"hot"], layout.keys
    if damaged == "older versions only":
        damage(file, layout.block(hot_only[-1]))
        report = repair_db(path)
        assert not report.data_lost
        assert any("only older versions" in note for note in report.notes)
        expected = b"version-199"
    else:
        damage(file, layout.block(0))
        report = repair_db(path)
        assert [(loss.first, loss.last) for loss in report.lost] == [(b"a", b"hot")]
        assert report.may_have_lost(b"hot") and not report.may_have_lost(b"z")
        # The newest version block 1 holds: what a read would have returned
        # had block 0's versions never been written.
        reader = TableReader(lsmkv.base.fs.DEFAULT_FS, os.path.join(report.set_aside, os.path.basename(file)), 0,
                             cache=None)
        expected = reader.block(1).value(0)
        reader.close()
    with lsmkv.open(path) as db:
        got = dict(db.scan())
    assert got.pop(b"hot") == expected
    assert got == ({b"z": b"z"} if damaged == "newest version" else {b"a": b"a", b"z": b"z"})


def ingested_store(path: str, external: str) -> None:
    """Every key written (level 0, sequence numbers above 0), then a table
    of new values for all of them ingested (sequence in the manifest only)."""
    with lsmkv.open(path, compression=None, **OPTS) as db:
        with db.write_batch() as b:
            for i in range(KEYS):
                b.put(key(i), b"written-%d" % i)
        db.flush()  # level 0, sequence numbers above 0
        with lsmkv.TableWriter(external, block_size=512, compression=None) as w:
            for i in range(KEYS):
                w.put(key(i), b"ingested-%d" % i)
        db.ingest([external])


def test_ingested_table_keeps_its_sequence_through_a_healthy_repair(tmp_path):
    path = str(tmp_path / "db")
    ingested_store(path, str(tmp_path / "ingest.sst"))
    report = repair_db(path)
    assert not report.data_lost
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == {key(j): b"ingested-%d" % j for j in range(KEYS)}


def test_salvaged_ingested_table_keeps_its_sequence(tmp_path):
    """An ingested table's salvaged entries read at the sequence the manifest
    gave it: its values stay newer than the older ones in other tables."""
    path = str(tmp_path / "db")
    ingested_store(path, str(tmp_path / "ingest.sst"))
    ingested = next(m for files in levels_of(path) for m in files if m.global_seq)
    file = table_file(path, ingested)
    layout = Layout(file)
    i = len(layout.offsets) // 2
    damage(file, layout.block(i))
    report = repair_db(path)
    in_block = set(layout.keys[i])
    with lsmkv.open(path) as db:
        got = dict(db.scan())
    expected = {key(j): (b"written-%d" if key(j) in in_block else b"ingested-%d") % j for j in range(KEYS)}
    assert got == expected
    assert {k for k in expected if report.may_have_lost(k)} == in_block


@pytest.mark.parametrize("seed", range(8))
def test_random_damage_loses_only_what_the_report_says(tmp_path, seed):
    """8 random bytes written at 1 to 3 random places of one table (data or
    metadata): every key outside the reported losses has its newest value,
    and no key ever holds a value that was not written to it."""
    rng = random.Random(seed)
    path = str(tmp_path / "db")
    model, old = layered_store(path, compacted=bool(seed % 2))
    written = {k: {old[k], model[k]} - {None} for k in model}
    file = table_file(path, rng.choice(tables(path)))
    size = os.path.getsize(file)
    with open(file, "r+b") as f:
        for _ in range(rng.randint(1, 3)):
            f.seek(rng.randrange(size - 8))
            f.write(rng.randbytes(8))
    report = repair_db(path)
    assert check_db(path).ok
    with lsmkv.open(path) as db:
        got = dict(db.scan())
        for k, v in model.items():
            if not report.may_have_lost(k):
                assert got.get(k) == v, k
                assert db.get(k) == v, k
    assert all(v in written[k] for k, v in got.items())


def test_format_1_table_keeps_every_block_its_index_locates(tmp_path, one_table):
    """A table of format 1 (length columns) with a damaged data block: the
    other blocks are read with that format's codec."""
    path = str(tmp_path / "db")
    model = one_table(None, path)
    file = table_file(path, tables(path)[-1])
    rewrite_as_format_1(file)
    layout = Layout(file)
    assert layout.footer.version == 1
    i = len(layout.offsets) // 2
    damage(file, layout.block(i))
    report = repair_db(path)
    lost = set(layout.keys[i])
    with lsmkv.open(path) as db:
        assert dict(db.scan()) == {k: v for k, v in model.items() if k not in lost}
    assert {k for k in model if report.may_have_lost(k)} == lost
