"""Builds lsmkv's compiled modules from the same ``.py`` sources, where it can.

Everything else about the package is in pyproject.toml. This file adds one
thing: the hot modules (``COMPILED_MODULES``) are compiled by Cython from
their plain Python source into extension modules that sit beside the ``.py``
files. The ``.py`` files stay the one source of truth; the extensions are
that source compiled (Cython's pure-Python mode: the annotations are not
enforced and no type is inferred beyond what Python guarantees, so a
compiled module behaves as its source does). The C types of the hottest
paths are declared beside their sources, in ``.pxd`` files (extension types
with typed fields, typed locals), and where a ``.pxd`` cannot say it, by
``@cython.locals`` in the ``.py`` (lsmkv/base/compile_hints.py stands in for
Cython's ``cython`` module when it is not installed).

The build is optional, as for aiohttp, yarl and multidict:

* no C compiler, or Cython missing: the pure package installs, no error;
* ``LSMKV_NO_EXTENSIONS=1`` at install time: nothing is compiled;
* a module that fails to compile: the whole compiled build is dropped (the
  engines' modules run as one build, never half of each).

After a build, ``lsmkv/_compiled.json`` records the SHA-256 of each
compiled module's source (its ``.py`` and ``.pxd``), so an import can tell
a compiled module from its edited source (``lsmkv/base/build.py`` refuses a
stale one).
"""

from __future__ import annotations

import json
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

#: The modules compiled, as paths from the repository root: the hot paths
#: of both engines (writes, point reads, scans and cursors, the caches, the
#: decoders). lsmkv/base/build.py reads the list back from the record this writes.
COMPILED_MODULES = [
    "lsmkv/base/checksum.py",
    "lsmkv/base/cursor.py",
    "lsmkv/base/fs.py",
    "lsmkv/base/key_search.py",
    "lsmkv/base/keys.py",
    "lsmkv/base/little_endian.py",
    "lsmkv/base/mapping.py",
    "lsmkv/base/write_queue.py",
    "lsmkv/lsm/cache.py",
    "lsmkv/lsm/cursor.py",
    "lsmkv/lsm/db.py",
    "lsmkv/lsm/memtable.py",
    "lsmkv/lsm/merge_read.py",
    "lsmkv/lsm/point_reads.py",
    "lsmkv/lsm/read_state.py",
    "lsmkv/lsm/skiplist.py",
    "lsmkv/lsm/table/block.py",
    "lsmkv/lsm/table/bloom.py",
    "lsmkv/lsm/table/builder.py",
    "lsmkv/lsm/table/columns.py",
    "lsmkv/lsm/table/format.py",
    "lsmkv/lsm/table/reader.py",
    "lsmkv/lsm/table_cache.py",
    "lsmkv/lsm/view_sources.py",
    "lsmkv/lsm/wal.py",
    "lsmkv/lsm/write_batch.py",
    "btree/bufferpool.py",
    "btree/cursor.py",
    "btree/db.py",
    "btree/leaf_runs.py",
    "btree/node.py",
    "btree/pagemap.py",
    "btree/pager.py",
    "btree/point_get.py",
    "btree/scan.py",
    "btree/tree.py",
    "btree/wal.py",
]

#: The record of a build, in the lsmkv package (lsmkv/base/build.py reads it).
RECORD_NAME = "_compiled.json"

#: Cython's directives: compile the source's Python semantics, nothing more.
DIRECTIVES = {"language_level": 3, "infer_types": False, "annotation_typing": False, "binding": True}


def _source_digest():
    """lsmkv/base/source_digest.py's function, the one build.py checks with,
    loaded by path: the package is not importable during an isolated build."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsmkv", "base", "source_digest.py")
    spec = importlib.util.spec_from_file_location("lsmkv_source_digest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.source_digest


source_digest = _source_digest()


def wanted() -> bool:
    return os.environ.get("LSMKV_NO_EXTENSIONS", "") in ("", "0")


def extensions() -> list:
    """The extension modules to build, or none (the pure package)."""
    if not wanted():
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("lsmkv: Cython is not installed; installing the pure Python package", file=sys.stderr)
        return []
    return cythonize(COMPILED_MODULES, compiler_directives=DIRECTIVES, quiet=True,
                     nthreads=os.cpu_count() or 1, build_dir=os.path.join("build", "cython"))


class OptionalBuildExt(build_ext):
    """build_ext that installs the pure package when compiling fails, and
    records the sources it compiled."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        # The record goes beside the compiled modules: in the source tree for
        # an editable install, in the build directory for a wheel.
        record = os.path.join(os.path.dirname(self.get_ext_fullpath("lsmkv._compiled")), RECORD_NAME)
        if os.path.exists(record):
            os.remove(record)
        if not self.extensions:
            return
        try:
            super().run()
        except Exception as error:  # no compiler, a failed compile: the pure package
            print(f"lsmkv: compiled modules not built ({error}); installing the pure Python package",
                  file=sys.stderr)
            self._drop_outputs()
            return
        with open(record, "w") as out:
            json.dump({"compiler": self._compiler_name(),
                       "modules": {path: source_digest(path) for path in COMPILED_MODULES}}, out, indent=1)

    def _compiler_name(self) -> str:
        import Cython
        return f"Cython {Cython.__version__}"

    def _drop_outputs(self) -> None:
        """Remove what a failed build left, so no module runs compiled."""
        for ext in self.extensions:
            path = self.get_ext_fullpath(ext.name)
            if os.path.exists(path):
                os.remove(path)
        self.extensions = []

    def get_outputs(self):
        return [path for path in super().get_outputs() if os.path.exists(path)]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
