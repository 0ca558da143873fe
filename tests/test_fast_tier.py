"""`pytest --fast` (scripts/test --fast), run on a small test module with
tests/conftest.py: it deselects the markers FAST_TIER_DESELECTS names, keeps
-m working beside it, and fails a test left in the tier that starts a child
process, except the engine's own compaction worker; without --fast every
test runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODULE = textwrap.dedent('''
    import subprocess
    import sys

    import pytest

    import lsmkv


    def test_plain():
        assert sum([1, 2]) == 3


    def test_starts_a_child():
        subprocess.run([sys.executable, "-c", "pass"], check=True)


    @pytest.mark.subprocess
    def test_marked_child():
        subprocess.run([sys.executable, "-c", "pass"], check=True)


    @pytest.mark.slow
    def test_slow():
        assert True


    @pytest.mark.kafka
    def test_kafka():
        assert True


    def test_compaction_in_the_worker_process(tmp_path):
        with lsmkv.open(str(tmp_path / "db"), write_buffer_size=4096) as db:
            assert db._compactor.use_process
            for i in range(3000):
                db.put(b"%06d" % i, b"x" * 100)
            db.compact_range()
            assert db._compactor.stats.compactions > 0
''')

pytestmark = pytest.mark.subprocess


@pytest.fixture
def project(tmp_path) -> str:
    """A folder with tests/conftest.py, the markers of pyproject.toml and the module above."""
    shutil.copy(os.path.join(HERE, "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --strict-markers -p no:cacheprovider\nmarkers =\n"
                                         + "".join(f"    {m}\n" for m in ("slow", "crash", "subprocess", "kafka",
                                                                          "spark", "soak")))
    (tmp_path / "test_tiers.py").write_text(MODULE)
    return str(tmp_path)


def run(project: str, *args: str) -> tuple[dict[str, str], str]:
    """{test name: PASSED/FAILED} of a pytest run in ``project``, and its output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    outcomes = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED") and rest.startswith("test_tiers.py::"):
            outcomes[rest.split("::")[1].split(" ")[0]] = word
    return outcomes, done.stdout


def test_the_fast_tier_deselects_its_markers_and_fails_a_child_process_left_in_it(project):
    outcomes, out = run(project, "--fast")
    assert outcomes == {"test_plain": "PASSED", "test_compaction_in_the_worker_process": "PASSED",
                        "test_starts_a_child": "FAILED"}, out
    assert "3 deselected" in out
    assert ("test_tiers.py::test_starts_a_child started a child process (subprocess.Popen: "
            f"{sys.executable} -c pass) but is not marked subprocess") in out


def test_fast_combines_with_a_marker_expression(project):
    outcomes, out = run(project, "--fast", "-m", "not kafka", "-k", "plain or child")
    assert outcomes == {"test_plain": "PASSED", "test_starts_a_child": "FAILED"}, out


def test_without_fast_every_test_runs(project):
    outcomes, out = run(project)
    assert set(outcomes.values()) == {"PASSED"} and len(outcomes) == 6, out
