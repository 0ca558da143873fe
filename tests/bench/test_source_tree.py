"""The bench tests exercise the bench package of this source tree: the
folder of these tests is no package that could stand in for it under the
name ``bench``, and nothing resolves it to another checkout."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_and_the_engines_are_imported_from_this_tree():
    import bench
    import bench.config
    import btree
    import lsmkv
    for module, package in ((bench, "bench"), (bench.config, "bench"), (btree, "btree"), (lsmkv, "lsmkv")):
        assert os.path.dirname(os.path.abspath(module.__file__)) == os.path.join(ROOT, package), module.__file__
