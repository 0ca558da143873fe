"""Child process of the crash tests: applies a seeded stream of operations
with sync=True and prints "ack N" after operation N returns.

The operation stream is a pure function of the seed (:func:`operations`), so
the parent regenerates it and knows exactly what each acknowledged operation
did. Usage: python crash_writer.py DBPATH SEED
"""

from __future__ import annotations

import random
import sys


def operations(seed: int, n: int = 100_000):
    """Yield ("put", k, v) / ("delete", k) / ("batch", [(k, v|None)...]) / ("flush",)."""
    rng = random.Random(seed)
    for i in range(n):
        r = rng.random()

        def key():
            return b"k%05d" % rng.randrange(3000)

        def value():
            return (b"%d:%d;" % (seed, i)) * rng.choice((1, 1, 1, 1, 8, 60, 400))
        if r < 0.55:
            yield ("put", key(), value())
        elif r < 0.70:
            yield ("delete", key())
        elif r < 0.97:
            yield ("batch", [(key(), value() if rng.random() < 0.8 else None) for _ in range(rng.randint(1, 25))])
        else:
            yield ("flush",)


def apply(model: dict, op) -> None:
    if op[0] == "put":
        model[op[1]] = op[2]
    elif op[0] == "delete":
        model.pop(op[1], None)
    elif op[0] == "batch":
        for k, v in op[1]:
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v


def main() -> None:
    import btree
    path, seed = sys.argv[1], int(sys.argv[2])
    out = sys.stdout
    db = btree.open(path, cache_size=64 * 4096, checkpoint_log_bytes=256 * 1024)
    out.write("ready\n")
    out.flush()
    for n, op in enumerate(operations(seed)):
        if op[0] == "put":
            db.put(op[1], op[2], sync=True)
        elif op[0] == "delete":
            db.delete(op[1], sync=True)
        elif op[0] == "batch":
            with db.write_batch(sync=True) as b:
                for k, v in op[1]:
                    if v is None:
                        b.delete(k)
                    else:
                        b.put(k, v)
        else:
            out.write("checkpoint\n")
            out.flush()
            db.flush()
        out.write(f"ack {n}\n")
        out.flush()


if __name__ == "__main__":
    main()
