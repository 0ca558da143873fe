#!/usr/bin/env python3
"""The leveled compaction benchmark, lsmkv against RocksDB: `lsmkv bench --suite compaction`
(bench/suites/compaction.py). This wrapper keeps the old command and its options
working: scripts/bench_compaction.py [OPTIONS] = lsmkv bench --suite compaction [OPTIONS]."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--suite", "compaction", *sys.argv[1:]]))
