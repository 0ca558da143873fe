"""The three layers of the code (docs/architecture.md, "Layers"), checked.

* ``lsmkv.base``: what both engines share; it imports nothing above it.
* The engines: ``lsmkv.lsm`` and ``btree``, each on ``lsmkv.base`` only
  (btree reads the LSM's table files in ``btree.bulk.ingest_tables``, and
  imports the LSM's table modules there, when it runs, never at import).
* What drives them: ``lsmkv`` itself (the public names, ``lsmkv.dbm``,
  ``lsmkv.stores``), ``lsmkv.terminal``, ``lsmkv.kafka``, ``lsmkv.spark``,
  ``lsmkv.crashtest``, ``lsmkv.faults``, ``lsmkv.cli`` and ``bench``.

The import graph is read from the source with ``ast`` (every ``import`` and
``from ... import``, at module level and inside functions), so a layer
broken by an import that runs only in some command is found too. A failure
names the import that breaks the rule, or prints the cycle it found.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("lsmkv", "btree", "bench")

#: The packages of the graph, lowest layer first; a module belongs to the
#: longest one its name starts with ("lsmkv": lsmkv/__init__.py, dbm.py, stores.py).
PACKAGES = ("lsmkv.base", "lsmkv.lsm", "btree", "lsmkv", "lsmkv.terminal", "lsmkv.kafka", "lsmkv.spark",
            "lsmkv.crashtest", "lsmkv.faults", "bench", "lsmkv.cli")
ENGINE_PACKAGES = ("lsmkv.lsm", "btree")
#: What each package of the two lower layers may import (besides itself).
MAY_IMPORT = {"lsmkv.base": set(), "lsmkv.lsm": {"lsmkv.base"}, "btree": {"lsmkv.base"}}
#: The one function of btree that may import the LSM engine (its table reader).
BTREE_READS_LSM_TABLES = ("btree.bulk", "ingest_tables")


def module_files() -> dict[str, Path]:
    """Every module of lsmkv/, btree/ and bench/ by its dotted name."""
    found = {}
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = module_files()


class Import:
    """One import statement's edge: ``source`` imports ``target`` at ``line``,
    at module level or inside the function ``function`` (or under ``if
    TYPE_CHECKING``, which never runs)."""

    def __init__(self, source: str, target: str, line: int, function: str | None, type_checking: bool) -> None:
        self.source, self.target, self.line = source, target, line
        self.function, self.type_checking = function, type_checking

    @property
    def runs_at_import(self) -> bool:
        return self.function is None and not self.type_checking

    def __str__(self) -> str:
        where = f" (in {self.function})" if self.function else " (if TYPE_CHECKING)" if self.type_checking else ""
        return f"{self.source} -> {self.target}  [{MODULES[self.source].relative_to(ROOT)}:{self.line}{where}]"


def _known(name: str) -> str | None:
    """The module ``name`` is, or the package holding it (a name imported from it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if node.level:
            base = module if is_package else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]

    def walk(node: ast.AST, function: str | None, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in dict.fromkeys(targets(child)):
                    target = _known(name)
                    if target is not None and target != module:
                        found.append(Import(module, target, child.lineno, function, type_checking))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, child.name if function is None else function, type_checking)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                walk(child, function, True)
            else:
                walk(child, function, type_checking)

    walk(ast.parse(path.read_text(), str(path)), None, False)
    return found


EDGES = [edge for module in MODULES for edge in imports_of(module)]


def package_of(module: str) -> str:
    return max((p for p in PACKAGES if module == p or module.startswith(p + ".")), key=len)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as the list of its nodes (the first repeated at
    the end), or None; nodes and edges are visited in sorted order, so the
    same graph always gives the same cycle."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def describe_cycle(cycle: list[str], edges: list[Import], key) -> str:
    lines = [" -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        lines.extend(f"    {edge}" for edge in edges if key(edge.source) == a and key(edge.target) == b)
    return "\n".join(lines)


def _modules_loaded_by(code: str) -> list[str]:
    """The lsmkv, btree and bench modules a fresh interpreter has loaded after ``code``."""
    probe = (f"import json, sys\n{code}\n"
             f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {TOP!r})))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.subprocess  # a fresh interpreter shows what an import loads
def test_import_btree_loads_nothing_of_the_lsm_engine_and_no_integration():
    loaded = _modules_loaded_by("import btree, btree.dbm")
    above = [m for m in loaded if not (m in ("lsmkv", "lsmkv.base") or m.startswith(("lsmkv.base.", "btree")))]
    assert "btree.db" in loaded and "lsmkv.base.fs" in loaded
    assert above == [], f"import btree loads {above}"


@pytest.mark.subprocess  # a fresh interpreter shows what an import loads
def test_import_lsmkv_loads_the_lsm_engine_when_a_name_of_it_is_first_used():
    loaded = _modules_loaded_by("import lsmkv, lsmkv.dbm")
    assert "lsmkv.base.errors" in loaded
    assert [m for m in loaded if m.startswith(("lsmkv.lsm", "btree"))] == []
    loaded = _modules_loaded_by("import lsmkv\nlsmkv.open")
    assert "lsmkv.lsm.db" in loaded and not any(m.startswith("btree") for m in loaded)
    loaded = _modules_loaded_by("import lsmkv\nlsmkv.run_in_transaction")  # a name of the shared layer
    assert "lsmkv.base.retry" in loaded
    assert [m for m in loaded if m.startswith(("lsmkv.lsm", "btree"))] == []


def test_lsmkv_keeps_its_public_names_and_lists_them():
    import lsmkv
    for name in lsmkv.__all__:
        assert getattr(lsmkv, name) is not None, name
        assert name in dir(lsmkv), name
    assert lsmkv.open.__module__ == "lsmkv.lsm" and lsmkv.DB.__name__ == "DB"
    assert callable(lsmkv.destroy) and callable(lsmkv.repair) and callable(lsmkv.checkpoint)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        lsmkv.nothing_here  # noqa: B018


def test_the_shared_layer_and_the_engines_import_only_what_is_below_them():
    broken = []
    for edge in EDGES:
        source, target = package_of(edge.source), package_of(edge.target)
        if source == target or source not in MAY_IMPORT or target in MAY_IMPORT[source]:
            continue
        if source == "btree" and target == "lsmkv.lsm" and (edge.source, edge.function) == BTREE_READS_LSM_TABLES:
            continue
        broken.append(str(edge))
    assert broken == [], "imports against the layers:\n" + "\n".join(broken)


def test_no_import_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for edge in EDGES:
        source, target = package_of(edge.source), package_of(edge.target)
        if source != target:
            graph.setdefault(source, set()).add(target)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between packages:\n" + describe_cycle(cycle, EDGES, package_of)


def test_no_import_cycle_between_the_files_of_a_package():
    graph: dict[str, set[str]] = {}
    for edge in EDGES:
        if edge.runs_at_import and package_of(edge.source) == package_of(edge.target):
            # a package's __init__ importing its own modules is how a package is built, not a cycle
            if not edge.target.startswith(edge.source + "."):
                graph.setdefault(edge.source, set()).add(edge.target)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between files:\n" + describe_cycle(
        cycle, [e for e in EDGES if e.runs_at_import], lambda m: m)


#: Dotted names in the docs that are not module paths: btree's file names,
#: file names, crash-test option prefixes, Kafka record header names.
NOT_MODULE_PATHS = re.compile(r"btree\.(pages|log|journal|md|NAME|page_size)|bench\.py|lsmkv\.(dlq|source)\b")


def _doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _resolves(name: str) -> bool:
    """Whether ``name`` (a.b.c) is a module of this tree, or a name inside
    the longest module of this tree it starts with (looked up in the
    files, not on sys.path, where an installed copy could answer)."""
    parts = name.split(".")
    cut = len(parts)
    while cut and ".".join(parts[:cut]) not in MODULES:
        cut -= 1
    if not cut:
        return False
    obj = importlib.import_module(".".join(parts[:cut]))
    for attr in parts[cut:]:
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def test_every_module_path_the_docs_name_exists():
    missing = []
    for page in _doc_pages():
        text = page.read_text()
        for match in re.finditer(r"(?<![\w/.-])((?:lsmkv|btree|bench)/[\w/]*?(?:\w+\.py|/))(?![\w/])", text):
            if not (ROOT / match.group(1)).exists():
                missing.append(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(1)}")
        for match in re.finditer(r"(?<![\w/.-])((?:lsmkv|btree|bench)(?:\.[A-Za-z_]\w*)+)", text):
            name = match.group(1)
            if not NOT_MODULE_PATHS.match(name) and not _resolves(name):
                missing.append(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {name}")
    assert missing == [], "the docs name modules that do not exist:\n" + "\n".join(missing)


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"y"}, "y": {"y"}}) == ["y", "y"]
