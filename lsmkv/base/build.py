"""Which build of lsmkv runs: its hot modules compiled, or all pure Python.

setup.py compiles the hot modules of both engines from their ``.py``
source (Cython) where a C compiler is present, and records the SHA-256 of
each source it compiled (the ``.py`` and the ``.pxd`` beside it) in
``lsmkv/_compiled.json``. Python's import system prefers an extension
module to the ``.py`` beside it, so without a check an edited source would
be shadowed by the module compiled from its old text.
``import lsmkv`` (which ``import btree`` runs first) decides once per
process:

* **compiled**: the record is there, every compiled module is there, and
  every source still has the digest it was compiled from;
* **pure**, otherwise: ``LSMKV_NO_EXTENSIONS=1`` asked for it, or nothing
  was compiled (no compiler at install), or a source changed since its build
  (``stale``: the edited ``.py`` runs, and a :class:`StaleBuildWarning`
  says which file to rebuild with ``pip install -e .``).

The build is one or the other for every module, never a mix, so what
``lsmkv --version``, ``stats()["build"]`` and the bench report name is what
ran. In the pure build an import finder placed first on ``sys.meta_path``
loads the ``.py`` of every ``lsmkv`` and ``btree`` module, whatever
extension modules sit beside them.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings

from .source_digest import source_digest

#: The environment variable that forces the pure build (at install: nothing
#: is compiled; at run time: the compiled modules are not loaded).
NO_EXTENSIONS = "LSMKV_NO_EXTENSIONS"

#: The packages whose modules the build covers.
PACKAGES = ("lsmkv", "btree")

RECORD_NAME = "_compiled.json"

#: The repository (or site-packages) directory holding the lsmkv and btree packages.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class StaleBuildWarning(RuntimeWarning):
    """A compiled module is older than its source: the source runs instead."""


class Build:
    """What runs: ``kind`` is "compiled" or "pure"; ``reason`` says why pure
    ("LSMKV_NO_EXTENSIONS=1", "not compiled", "stale: <files> ...");
    ``compiler`` names what compiled the modules; ``modules`` are the
    compiled modules' sources (paths from the package root)."""

    __slots__ = ("kind", "reason", "compiler", "modules")

    def __init__(self, kind: str, reason: str = "", compiler: str = "", modules: tuple[str, ...] = ()) -> None:
        self.kind, self.reason, self.compiler, self.modules = kind, reason, compiler, modules

    def __repr__(self) -> str:
        return f"Build({self.describe()})"

    @property
    def compiled(self) -> bool:
        return self.kind == "compiled"

    def describe(self) -> str:
        """One line: "compiled (Cython 3.3.1, 33 modules)" or "pure Python (reason)"."""
        if self.compiled:
            return f"compiled ({self.compiler}, {len(self.modules)} modules)"
        return f"pure Python ({self.reason})" if self.reason else "pure Python"

    def as_dict(self) -> dict:
        return {"build": self.kind, "reason": self.reason, "compiler": self.compiler,
                "compiled_modules": len(self.modules) if self.compiled else 0}


def _compiled_path(source: str) -> str | None:
    """The extension module built from ``source`` (a ``.py`` path), if present."""
    stem = source[:-3]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(stem + suffix):
            return stem + suffix
    return None


def decide(root: str = _ROOT, environ=os.environ) -> Build:
    """The build the modules under ``root`` make up, from its record and the
    sources' digests (and ``environ``'s LSMKV_NO_EXTENSIONS)."""
    if environ.get(NO_EXTENSIONS, "") not in ("", "0"):
        return Build("pure", f"{NO_EXTENSIONS}=1")
    try:
        with open(os.path.join(root, "lsmkv", RECORD_NAME)) as file:
            record = json.load(file)
        modules = dict(record["modules"])
        compiler = str(record["compiler"])
    except FileNotFoundError:
        return Build("pure", "not compiled")
    except (OSError, ValueError, KeyError, TypeError) as error:
        return Build("pure", f"unreadable {RECORD_NAME}: {error}")
    missing = [path for path in modules if _compiled_path(os.path.join(root, path)) is None]
    if missing:
        return Build("pure", "compiled modules missing: " + ", ".join(missing))
    stale = [path for path, digest in modules.items() if source_digest(os.path.join(root, path)) != digest]
    if stale:
        return Build("pure", "stale: " + ", ".join(stale) + " changed since compiled")
    return Build("compiled", compiler=compiler, modules=tuple(modules))


class _SourceFinder:
    """The pure build's import finder: an ``lsmkv`` or ``btree`` module is
    loaded from its ``.py``, never from an extension module beside it."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if path is None or fullname.partition(".")[0] not in PACKAGES:
            return None
        name = fullname.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, name + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None  # a package, or not ours: the usual finders

    @staticmethod
    def invalidate_caches() -> None:
        pass


def _install(build: Build) -> None:
    if build.compiled:
        return
    if not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())
    if build.reason.startswith("stale:"):
        warnings.warn(f"lsmkv runs its Python source: {build.reason[len('stale: '):]}; "
                      f"rebuild the compiled modules with `pip install -e .`", StaleBuildWarning, stacklevel=3)


#: The build of this process, decided at ``import lsmkv``.
BUILD = decide()
_install(BUILD)
