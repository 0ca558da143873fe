"""Child process of the tests of snapshots across processes
(tests/btree/test_reader_table.py, tests/api/test_snapshot_lifetime.py):
a read-only handle of either engine that takes a
snapshot, a cursor and a transaction, reads a little of each, prints
"ready" and waits; on "check" it reads all of them and prints how many
entries each saw with generation 0's values ("checked N N N N"); on
"close" it closes them and prints "closed"; at the end of stdin it exits.
Usage: python snapshot_reader.py ENGINE DBPATH (ENGINE: lsm or btree)"""

from __future__ import annotations

import sys


def main() -> None:
    import btree
    import lsmkv
    engine, path = sys.argv[1], sys.argv[2]
    if engine == "btree":
        db = btree.open(path, read_only=True, cache_size=0)
    else:
        db = lsmkv.open(path, read_only=True, block_cache_size=0)
    with db:
        snap = db.snapshot()
        cursor = db.iterator()
        cursor.seek_to_first()
        txn = db.transaction()
        assert txn.get(b"k00000").startswith(b"g0:")
        first = [next(iter(snap.scan()))]
        print("ready", flush=True)
        for line in sys.stdin:
            if line.strip() == "check":
                seen = first + list(snap.scan())[1:]
                walked = []
                while cursor.valid():
                    walked.append((cursor.key(), cursor.value()))
                    cursor.next()
                in_txn = list(txn.scan())
                got = [txn.get(k) for k, _ in seen[::50]]

                def gen0(items):
                    return sum(1 for k, v in items if v == b"g0:" + k * 8)

                print("checked", gen0(seen), gen0(walked), gen0(in_txn),
                      sum(1 for v in got if v.startswith(b"g0:")), flush=True)
            elif line.strip() == "close":
                snap.close()
                cursor.close()
                txn.rollback()
                print("closed", flush=True)


if __name__ == "__main__":
    main()
