#!/usr/bin/env python3
"""How many keys `repair` keeps after 8 bytes of one block or page are overwritten.

Run: .venv/bin/python scripts/repair_damage.py [--engine lsm|btree|both] [--keys 20000]

For each engine: writes --keys keys (16-byte keys, --value-size-byte
values, compressible unless --random-values) with default options and, for
lsm, compacts them (so they sit in tables: the largest holds most of them);
overwrites 8 bytes in the middle of one block -- lsm: the middle data block
of the largest table; btree: the middle page of btree.pages -- checks that
`check` finds the damage, repairs, and counts the keys the repaired store
returns and those returned with exactly the value written (a key is never
returned with another value). Prints one line per engine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import btree  # noqa: E402
import lsmkv  # noqa: E402
from lsmkv.lsm.check import check_db  # noqa: E402
from lsmkv.lsm.table.reader import TableReader  # noqa: E402

DAMAGE = bytes.fromhex("deadbeefdeadbeef")


def _value(i: int, size: int, rng: random.Random | None) -> bytes:
    if rng is not None:
        return rng.randbytes(size)
    return (b"value-%d-" % i).ljust(size, b"x")


def _damage_lsm(path: str) -> str:
    tables = [n for n in os.listdir(path) if n.endswith(".sst")]
    largest = max(tables, key=lambda n: os.path.getsize(os.path.join(path, n)))
    full = os.path.join(path, largest)
    reader = TableReader(lsmkv.base.fs.DEFAULT_FS, full, 0, cache=None)
    try:
        i = reader.num_blocks // 2
        offset = reader.index_offsets[i] + reader.index_sizes[i] // 2
        where = (f"{largest} ({reader.properties.entries} of the keys, {reader.num_blocks} data blocks), "
                 f"data block {i} at offset {offset}")
    finally:
        reader.close()
    _overwrite(full, offset)
    return where


def _damage_btree(path: str, page_size: int) -> str:
    full = os.path.join(path, "btree.pages")
    slot = os.path.getsize(full) // page_size // 2
    offset = slot * page_size + page_size // 2
    _overwrite(full, offset)
    return f"btree.pages ({os.path.getsize(full) // page_size} pages), slot {slot} at offset {offset}"


def _overwrite(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(DAMAGE)


def run(engine: str, keys: int, value_size: int, random_values: bool, root: str) -> None:
    path = os.path.join(root, engine)
    rng = random.Random(1) if random_values else None
    written = {b"key%012d" % i: _value(i, value_size, rng) for i in range(keys)}
    module = lsmkv if engine == "lsm" else btree
    with module.open(path) as db:
        items = list(written.items())
        for start in range(0, len(items), 1000):
            with db.write_batch() as batch:
                for k, v in items[start:start + 1000]:
                    batch.put(k, v)
        if engine == "lsm":
            db.compact_range()
    where = _damage_lsm(path) if engine == "lsm" else _damage_btree(path, 4096)
    check = btree.check(path) if engine == "btree" else check_db(path)
    assert not check.ok, "the damage was not detected"
    report = module.repair(path)
    with module.open(path) as db:
        got = dict(db.scan())
    kept = len(got)
    exact = sum(written.get(k) == v for k, v in got.items())
    ranges = "; ".join(loss.key_range() for loss in report.lost)
    print(f"{engine}: 8 bytes overwritten in {where}: repair kept {kept:,} of {keys:,} keys "
          f"({exact:,} with their written value, {len(report.lost)} loss(es): {ranges})")
    assert exact == kept, "a key came back with a value that was never written"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["lsm", "btree", "both"], default="both")
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--random-values", action="store_true", help="incompressible values (raw blocks)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="repair-damage-")
    try:
        for engine in (["lsm", "btree"] if args.engine == "both" else [args.engine]):
            run(engine, args.keys, args.value_size, args.random_values, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
