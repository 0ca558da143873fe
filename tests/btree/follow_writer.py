"""Child process of the read-only follower test: rewrites every key round
after round, checkpointing after each, until told to stop (stdin closes).
Usage: python follow_writer.py DBPATH"""

from __future__ import annotations

import sys
import threading


def main() -> None:
    import btree
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with btree.open(sys.argv[1], page_size=512, cache_size=64 * 512) as db:
        r = 0
        while not stop.is_set() and r < 400:
            r += 1
            with db.write_batch() as b:
                for i in range(0, 1000, 3):
                    b.put(b"k%04d" % i, b"r%d" % r)
            for i in range(1, 1000, 3):
                db.put(b"k%04d" % i, b"r%d" % r + b"x" * (r % 50))
            db.flush()
            print(r, flush=True)


if __name__ == "__main__":
    main()
