"""Shared test fixtures and the --soak option (long soak tests are opt-in)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", default=False,
                     help="also run the long soak tests (marked 'soak')")


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


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    counter = config.stash.get(_FUZZ_CASES, None)
    if not counter:
        return
    terminalreporter.section("fuzz cases run")
    for name, n in sorted(counter.items()):
        terminalreporter.write_line(f"{n:8d}  {name}")
    terminalreporter.write_line(f"{sum(counter.values()):8d}  total")
