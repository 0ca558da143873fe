#!/usr/bin/env python3
"""The lsmkv engine micro-benchmark against dict, SortedDict, RocksDB and LevelDB: `lsmkv bench --suite lsm`
(bench/suites/lsm.py). This wrapper keeps the old command and its options
working: scripts/bench_lsm.py [OPTIONS] = lsmkv bench --suite lsm [OPTIONS]."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--suite", "lsm", *sys.argv[1:]]))
