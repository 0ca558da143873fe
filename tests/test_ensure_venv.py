"""scripts/ensure-venv installs the extras a command asks for into one venv:
its stamp records pyproject.toml's hash and the extras installed; a call
asking for extras already there installs nothing; one asking for more adds
them to those installed (scripts/test after scripts/bench), and a changed
pyproject.toml reinstalls every extra installed so far.

Real venvs and real pip installs, on a copy of the sources whose
pyproject.toml gains an extra of one small package (so that two extras can
be installed one after the other without the large ones). Slow: pip
installs lsmkv's dependencies once (from pip's cache when it has them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What pip needs to install the sources editable, and the script.
SOURCES = ("pyproject.toml", "README.md", "lsmkv", "btree", "bench", "scripts/ensure-venv")
#: The small extra the copy's pyproject.toml gains.
SMALL_EXTRA = 'small = ["six>=1.16"]\n'

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


@pytest.fixture
def tree(tmp_path) -> str:
    src = tmp_path / "src"
    for name in SOURCES:
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "_compiled.json"))
        else:
            os.makedirs((src / name).parent, exist_ok=True)
            shutil.copy2(path, src / name)
    pyproject = (src / "pyproject.toml").read_text()
    anchor = "[project.optional-dependencies]\n"
    assert anchor in pyproject
    (src / "pyproject.toml").write_text(pyproject.replace(anchor, anchor + SMALL_EXTRA))
    return str(src)


def ensure(tree: str, venv: str, *extras: str) -> subprocess.CompletedProcess:
    """scripts/ensure-venv [EXTRAS] of the copy, into ``venv``."""
    env = dict(os.environ, LSMKV_VENV=venv, PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    done = subprocess.run([os.path.join(tree, "scripts", "ensure-venv"), *extras], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == os.path.join(venv, "bin") + "\n"
    return done


def stamped_extras(venv: str) -> str:
    with open(os.path.join(venv, ".lsmkv-installed")) as f:
        [line] = [line for line in f if line.startswith("extras ")]
    return line[len("extras "):].rstrip("\n")


def importable(venv: str, module: str) -> bool:
    return subprocess.run([os.path.join(venv, "bin", "python"), "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def test_a_venv_gains_the_extras_asked_for_and_installs_nothing_it_has(tree, tmp_path):
    venv = str(tmp_path / "venv")
    first = ensure(tree, venv, "dev")
    assert "installing lsmkv[dev]" in first.stderr
    assert stamped_extras(venv) == "dev"
    assert importable(venv, "lsmkv") and importable(venv, "hypothesis") and not importable(venv, "six")

    # Asking for what is there (or less) installs nothing.
    assert ensure(tree, venv, "dev").stderr == ""
    assert ensure(tree, venv, "").stderr == ""

    # Asking for another extra adds it to those installed.
    more = ensure(tree, venv, "small")
    assert "installing lsmkv[dev,small]" in more.stderr
    assert stamped_extras(venv) == "dev,small" and importable(venv, "six")
    assert ensure(tree, venv, "small,dev").stderr == ""

    # A changed pyproject.toml reinstalls every extra installed so far.
    with open(os.path.join(tree, "pyproject.toml"), "a") as f:
        f.write("\n# changed\n")
    again = ensure(tree, venv, "")
    assert "installing lsmkv[dev,small]" in again.stderr
    assert stamped_extras(venv) == "dev,small"
