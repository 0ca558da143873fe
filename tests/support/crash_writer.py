"""Child process for crash tests: writes random operations to a database and
records each one in an oracle file before (intent) and after (ack) it is
acknowledged. The parent SIGKILLs it at a random moment.

Oracle lines (JSON): {"op": n, "kind": "put"|"delete"|"batch", "items": [[key_hex, value_hex|null], ...],
"sync": bool} for an intent, and {"ack": n} once the write returned. Writes go
straight to the OS (os.write), so the oracle survives the kill.

usage: python crash_writer.py ENGINE DB ORACLE SEED FIRST_OP [option=value ...]
"""

from __future__ import annotations

import importlib
import json
import os
import random
import sys


def main() -> None:
    engine, path, oracle_path, seed, first_op = sys.argv[1:6]
    options = {}
    for arg in sys.argv[6:]:
        name, value = arg.split("=", 1)
        options[name] = int(value) if value.isdigit() else value
    module = importlib.import_module("lsmkv" if engine == "lsm" else engine)
    rng = random.Random(int(seed))
    fd = os.open(oracle_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def record(obj) -> None:
        os.write(fd, (json.dumps(obj) + "\n").encode())

    db = module.open(path, **options)
    print("ready", flush=True)
    op = int(first_op)
    while True:
        op += 1
        r = rng.random()
        sync = rng.random() < 0.3
        if r < 0.6:
            key = b"k%04d" % rng.randrange(400)
            value = b"%d:" % op + rng.randbytes(rng.randrange(0, 200))
            record({"op": op, "kind": "put", "items": [[key.hex(), value.hex()]], "sync": sync})
            db.put(key, value, sync=sync)
        elif r < 0.75:
            key = b"k%04d" % rng.randrange(400)
            record({"op": op, "kind": "delete", "items": [[key.hex(), None]], "sync": sync})
            db.delete(key, sync=sync)
        else:
            items = []
            for i in range(rng.randrange(1, 12)):
                if rng.random() < 0.5:
                    key = b"b%08d-%02d" % (op, i)  # fresh keys: all of a batch or none of it
                else:
                    key = b"k%04d" % rng.randrange(400)
                value = None if rng.random() < 0.2 else b"%d:" % op + rng.randbytes(rng.randrange(0, 100))
                items.append([key.hex(), None if value is None else value.hex()])
            record({"op": op, "kind": "batch", "items": items, "sync": sync})
            with db.write_batch(sync=sync) as batch:
                for key_hex, value_hex in items:
                    if value_hex is None:
                        batch.delete(bytes.fromhex(key_hex))
                    else:
                        batch.put(bytes.fromhex(key_hex), bytes.fromhex(value_hex))
        record({"ack": op})
        if rng.random() < 0.002:
            db.flush()


if __name__ == "__main__":
    main()
