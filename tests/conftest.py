"""Shared test fixtures and the --soak option (long soak tests are opt-in)."""

from __future__ import annotations

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
