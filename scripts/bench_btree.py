#!/usr/bin/env python3
"""The btree engine micro-benchmark against LMDB, sqlite3 and lsmkv: `lsmkv bench --suite btree`
(bench/suites/btree.py). This wrapper keeps the old command and its options
working: scripts/bench_btree.py [OPTIONS] = lsmkv bench --suite btree [OPTIONS]."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--suite", "btree", *sys.argv[1:]]))
