"""Which build runs (lsmkv/base/build.py): the compiled modules, or their sources.

* ``decide`` on made-up trees: no record, LSMKV_NO_EXTENSIONS=1, a compiled
  module missing, a source edited since its build, all in order.
* On a copy of this installation's packages, in child processes: the
  compiled build loads every recorded module compiled; LSMKV_NO_EXTENSIONS=1
  loads every one from its ``.py``; an edited ``.py`` is never shadowed by
  the module compiled from its old text (the whole build runs pure, and a
  StaleBuildWarning names the file).
* setup.py without a C compiler installs the pure package, without error.

The copy tests need the compiled build; they skip on a pure install, except
where LSMKV_EXPECT_COMPILED=1 (as .ci/run sets it) says the install must have
compiled it: there a pure install fails them.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys

import pytest

from lsmkv.base import build
from lsmkv.base.build import BUILD, NO_EXTENSIONS, RECORD_NAME, Build, decide

ROOT = build._ROOT
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def make_tree(root, sources: dict[str, str], compiled: list[str], digests: dict[str, str] | None = None) -> None:
    """Sources (path -> text) under ``root``, an empty stand-in extension
    beside each of ``compiled``, and a record of the sources' digests (or
    ``digests``)."""
    for path, text in sources.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as out:
            out.write(text)
    for path in compiled:
        open(os.path.join(root, path[:-3] + SUFFIX), "w").close()
    record = {"compiler": "Cython 9.9", "modules": digests if digests is not None else
              {path: build.source_digest(os.path.join(root, path)) for path in sources}}
    with open(os.path.join(root, "lsmkv", RECORD_NAME), "w") as out:
        json.dump(record, out)


SOURCES = {"lsmkv/hot.py": "X = 1\n", "btree/hot.py": "Y = 2\n"}


def test_a_tree_whose_every_module_is_compiled_from_its_current_source_is_the_compiled_build(tmp_path):
    make_tree(tmp_path, SOURCES, list(SOURCES))
    found = decide(str(tmp_path), {})
    assert found.compiled and found.compiler == "Cython 9.9" and set(found.modules) == set(SOURCES)
    assert found.describe() == "compiled (Cython 9.9, 2 modules)"
    assert found.as_dict() == {"build": "compiled", "reason": "", "compiler": "Cython 9.9", "compiled_modules": 2}


@pytest.mark.parametrize("value, kind", [("1", "pure"), ("yes", "pure"), ("0", "compiled"), ("", "compiled")])
def test_lsmkv_no_extensions_forces_the_pure_build(tmp_path, value, kind):
    make_tree(tmp_path, SOURCES, list(SOURCES))
    found = decide(str(tmp_path), {NO_EXTENSIONS: value})
    assert found.kind == kind
    if kind == "pure":
        assert found.reason == "LSMKV_NO_EXTENSIONS=1" and found.describe() == "pure Python (LSMKV_NO_EXTENSIONS=1)"


def test_a_tree_without_a_record_is_the_pure_build(tmp_path):
    (tmp_path / "lsmkv").mkdir()
    assert decide(str(tmp_path), {}).reason == "not compiled"


def test_an_unreadable_record_is_the_pure_build_and_says_why(tmp_path):
    make_tree(tmp_path, SOURCES, list(SOURCES))
    (tmp_path / "lsmkv" / RECORD_NAME).write_text("{not json")
    found = decide(str(tmp_path), {})
    assert found.kind == "pure" and found.reason.startswith(f"unreadable {RECORD_NAME}")


def test_a_missing_compiled_module_makes_the_whole_build_pure(tmp_path):
    make_tree(tmp_path, SOURCES, ["lsmkv/hot.py"])
    found = decide(str(tmp_path), {})
    assert found.kind == "pure" and found.reason == "compiled modules missing: btree/hot.py"


def test_a_source_edited_since_its_build_makes_the_whole_build_pure_and_names_the_file(tmp_path):
    make_tree(tmp_path, SOURCES, list(SOURCES))
    (tmp_path / "btree" / "hot.py").write_text("Y = 3\n")
    found = decide(str(tmp_path), {})
    assert found.kind == "pure" and found.reason == "stale: btree/hot.py changed since compiled"
    (tmp_path / "btree" / "hot.py").write_text("Y = 2\n")  # back to the text it was compiled from
    assert decide(str(tmp_path), {}).compiled


def test_declarations_edited_since_the_build_make_the_whole_build_pure(tmp_path):
    (tmp_path / "btree").mkdir()
    (tmp_path / "btree" / "hot.pxd").write_text("cdef class Hot:\n    pass\n")
    make_tree(tmp_path, SOURCES, list(SOURCES))  # recorded: each .py with the .pxd beside it
    assert decide(str(tmp_path), {}).compiled
    (tmp_path / "btree" / "hot.pxd").write_text("cdef class Hot:\n    cdef public object x\n")
    found = decide(str(tmp_path), {})
    assert found.kind == "pure" and found.reason == "stale: btree/hot.py changed since compiled"


def test_this_process_runs_the_build_its_tree_makes_up():
    assert BUILD.kind == decide().kind
    if os.environ.get("LSMKV_EXPECT_COMPILED") == "1":
        assert BUILD.compiled, f"the install was expected to compile the hot modules: {BUILD.describe()}"


def test_both_engines_stats_name_the_build(tmp_path):
    import btree
    import lsmkv
    for db in (lsmkv.open(str(tmp_path / "lsm")), btree.open(str(tmp_path / "btree"))):
        with db:
            assert db.stats()["build"] == BUILD.kind


# --- the real compiled modules, on a copy ---------------------------------------------------------

def compiled_build_or_skip() -> Build:
    if BUILD.compiled:
        return BUILD
    if os.environ.get("LSMKV_EXPECT_COMPILED") == "1":
        pytest.fail(f"the install was expected to compile the hot modules: {BUILD.describe()}")
    pytest.skip(f"this install runs {BUILD.describe()}")


@pytest.fixture
def installed_copy(tmp_path) -> str:
    """A copy of the lsmkv and btree packages as installed here, compiled modules and record included."""
    compiled_build_or_skip()
    for package in ("lsmkv", "btree"):
        shutil.copytree(os.path.join(ROOT, package), tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return str(tmp_path)


PROBE = """
import importlib, json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import lsmkv.base.build as b, btree
modules = [path[:-3].replace("/", ".") for path in json.load(open(b._ROOT + "/lsmkv/_compiled.json"))["modules"]]
files = {name: importlib.import_module(name).__file__ for name in modules}
print(json.dumps({"kind": b.BUILD.kind, "reason": b.BUILD.reason, "files": files,
                  "warnings": [(w.category.__name__, str(w.message)) for w in caught],
                  "edited": getattr(importlib.import_module("lsmkv.lsm.skiplist"), "EDITED", False)}))
"""


def probe(root: str, **env) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != NO_EXTENSIONS}
    environ.update(PYTHONPATH=root, **env)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=root, env=environ, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.subprocess
def test_the_compiled_build_loads_every_recorded_module_compiled(installed_copy):
    found = probe(installed_copy)
    assert found["kind"] == "compiled" and found["warnings"] == []
    assert len(found["files"]) == len(BUILD.modules)
    for name, path in found["files"].items():
        assert path.startswith(installed_copy) and path.endswith(SUFFIX), name


@pytest.mark.subprocess
def test_lsmkv_no_extensions_loads_every_module_from_its_source(installed_copy):
    found = probe(installed_copy, **{NO_EXTENSIONS: "1"})
    assert found["kind"] == "pure" and found["reason"] == "LSMKV_NO_EXTENSIONS=1"
    for name, path in found["files"].items():
        assert path.endswith(".py"), name


@pytest.mark.subprocess
def test_an_edited_source_is_never_shadowed_by_its_stale_compiled_module(installed_copy):
    with open(os.path.join(installed_copy, "lsmkv", "lsm", "skiplist.py"), "a") as source:
        source.write("\nEDITED = True\n")
    found = probe(installed_copy)
    assert found["kind"] == "pure" and found["reason"] == "stale: lsmkv/lsm/skiplist.py changed since compiled"
    assert found["edited"] is True  # the edit runs
    for name, path in found["files"].items():  # and no compiled module beside it
        assert path.endswith(".py"), name
    assert found["warnings"] == [["StaleBuildWarning", "lsmkv runs its Python source: lsmkv/lsm/skiplist.py "
                                  "changed since compiled; rebuild the compiled modules with `pip install -e .`"]]


# --- installing without a compiler ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.subprocess
def test_setup_without_a_c_compiler_installs_the_pure_package_without_error(tmp_path):
    pytest.importorskip("Cython")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "lsmkv", "btree", "bench"):
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.pyc", "*.so", RECORD_NAME))
        else:
            shutil.copy2(path, src / name)
    target = tmp_path / "site"
    env = dict(os.environ, CC="false", CXX="false", LDSHARED="false")
    env.pop(NO_EXTENSIONS, None)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--no-build-isolation",
                           "--target", str(target), str(src)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lsmkv: compiled modules not built" in done.stdout + done.stderr  # it tried, and fell back
    installed = [os.path.join(d, f) for d, _, files in os.walk(target) for f in files]
    assert not [f for f in installed if f.endswith(SUFFIX) or f.endswith(RECORD_NAME)]
    assert os.path.exists(target / "lsmkv" / "lsm" / "skiplist.py")
    assert decide(str(target), {}).reason == "not compiled"
