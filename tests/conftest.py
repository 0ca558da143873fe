"""Shared test fixtures, the --soak option (long soak tests are opt-in) and
the --fast option (the fast tier: FAST_TIER_DESELECTS says what it leaves out)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import pytest

#: tests/ on the import path: test modules import the helpers shared across
#: folders as ``helpers.<module>`` (tests/helpers/).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: What --fast (scripts/test --fast) deselects, as a marker expression. The
#: fast tier left is every test that needs no broker, no Spark and no child
#: process, and is not slow (pyproject.toml's marker list says what each means).
FAST_TIER_DESELECTS = "slow or crash or subprocess or kafka or spark or soak"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", default=False,
                     help="also run the long soak tests (marked 'soak')")
    parser.addoption("--fast", action="store_true", default=False,
                     help=f"the fast tier: deselect the tests marked {FAST_TIER_DESELECTS} "
                          "(combines with -m); a test left that starts a child process fails")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--fast"):
        return
    fast = f"not ({FAST_TIER_DESELECTS})"
    config.option.markexpr = f"({config.option.markexpr}) and {fast}" if config.option.markexpr else fast
    sys.addaudithook(_note_child_process)


# -- the fast tier starts no child process ----------------------------------------

#: Audit events of starting a child process (multiprocessing's fork start method
#: raises os.fork).
_CHILD_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                                   "os.posix_spawnp", "os.spawn", "os.system", "os.exec"})
_children_started: list[str] = []


def _note_child_process(event: str, args: tuple) -> None:
    if event not in _CHILD_PROCESS_EVENTS:
        return
    command = args[1] if event == "subprocess.Popen" else args
    words = [str(w) for w in command] if isinstance(command, (list, tuple)) else [str(command)]
    if not _started_by_the_code_on_its_own(words):
        _children_started.append(f"{event}: {' '.join(words)[:200]}")


def _started_by_the_code_on_its_own(words: list[str]) -> bool:
    """Helper processes the code under test starts by itself, which leave a
    test in the fast tier: the lsm engine's compaction worker (a database
    with default options starts one), the `git rev-parse` that records the
    commit in bench results, and ldconfig (ctypes.util.find_library)."""
    program = os.path.basename(words[0]) if words else ""
    return program in ("git", "ldconfig") or any(w.endswith("compaction_worker") for w in words)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not item.config.getoption("--fast"):
        return (yield)
    _children_started.clear()
    result = yield
    if _children_started:
        pytest.fail(f"{item.nodeid} started a child process ({_children_started[0]}) but is not marked "
                    "subprocess (or crash): the fast tier starts none", pytrace=False)
    return result


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--soak"):
        return
    opt_in = pytest.mark.skip(reason="soak test: run with --soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(opt_in)


# -- another process holding a database open ---------------------------------

def _directory_bytes(path: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.fixture
def directory_bytes():
    """``directory_bytes(path)``: every file's bytes in the directory, by
    name; compare two of these to show that an operation changed nothing."""
    return _directory_bytes


@pytest.fixture
def writer_process():
    """``with writer_process("lsmkv" or "btree", path):`` runs the body while
    another process holds the database open for writing, then lets that
    process close it and checks it exited cleanly."""
    @contextlib.contextmanager
    def holding(module: str, path: str):
        code = textwrap.dedent(f"""
            import {module}, sys
            db = {module}.open({path!r})
            print("open", flush=True)
            sys.stdin.read()
            db.close()
        """)
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "open"
            yield proc
        finally:
            proc.communicate("", timeout=60)
        assert proc.returncode == 0
    return holding


@pytest.fixture
def refused_while_held(writer_process, directory_bytes):
    """``refused_while_held("lsmkv" or "btree", path, operation)``: while
    another process holds the database at ``path`` open for writing,
    ``operation(path)`` must raise LockError naming that process and change
    no file."""
    from lsmkv.base.errors import LockError

    def check(module: str, path: str, operation) -> None:
        with writer_process(module, path):
            during = directory_bytes(path)
            with pytest.raises(LockError, match="open for writing in another process"):
                operation(path)
            assert directory_bytes(path) == during
    return check


# -- fuzzing (tests/test_fuzz_decoders.py) --------------------------------------

from collections import Counter  # noqa: E402

from hypothesis import settings  # noqa: E402

#: `pytest --hypothesis-profile fuzz tests/test_fuzz_decoders.py`: the long
#: fuzzing run (docs/reliability.md reports its figures).
settings.register_profile("fuzz", max_examples=1000, deadline=None)

_FUZZ_CASES = pytest.StashKey[Counter]()


@pytest.fixture(scope="session")
def fuzz_counter(request: pytest.FixtureRequest) -> Counter:
    """Fuzz cases run, per decoder (printed at the end of the session)."""
    counter = request.config.stash.setdefault(_FUZZ_CASES, Counter())
    return counter


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the fuzz counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    counter = session.config.stash.get(_FUZZ_CASES, None)
    if workeroutput is not None and counter:
        workeroutput["fuzz_cases"] = dict(counter)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """In the pytest-xdist controller: add a finished worker's fuzz counts."""
    counts = getattr(node, "workeroutput", {}).get("fuzz_cases")
    if counts:
        node.config.stash.setdefault(_FUZZ_CASES, Counter()).update(counts)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    counter = config.stash.get(_FUZZ_CASES, None)
    if not counter:
        return
    terminalreporter.section("fuzz cases run")
    for name, n in sorted(counter.items()):
        terminalreporter.write_line(f"{n:8d}  {name}")
    terminalreporter.write_line(f"{sum(counter.values()):8d}  total")
