"""Each extra installs what its commands import, as a user installs it.

For each extra that brings commands (kafka, spark, bench; ``references``
only adds engines to the bench), a fresh virtual environment
(``python -m venv``) gets lsmkv's wheel with that extra alone
(``pip install 'lsmkv-...whl[EXTRA]'``, packages from PyPI or from pip's
own cache, not compiled to .pyc: the commands run once), and runs its commands' ``--help`` and one real command. The
wheel is built once, from a copy of the sources (pip's in-tree build would
leave build/ and *.egg-info in the work tree). Slow: minutes, most of it
pip installing the extra's packages (pyspark is the largest).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What goes into the wheel (pyproject.toml's packages and readme).
SOURCES = ("pyproject.toml", "README.md", "lsmkv", "btree", "bench")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> str:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "_compiled.json"))
        else:
            shutil.copy(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    [name] = os.listdir(out)
    return str(out / name)


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _commands(tmp_path) -> dict[str, list[tuple[list[str], int, str]]]:
    """{extra: [(lsmkv arguments, exit code, text the output must hold)]}."""
    nowhere = f"127.0.0.1:{_free_port()}"
    return {
        "kafka": [
            (["kafka", "load", "--help"], 0, "--startup-timeout"),
            (["kafka", "demo", "--help"], 0, "--keep"),
            # A real load, against servers that are not there: the one-line error, not an ImportError.
            (["kafka", "load", "--bootstrap-servers", nowhere, "--topic", "t", "--group", "g", "--db",
              str(tmp_path / "kafka.db"), "--until-caught-up", "--startup-timeout", "1"], 1,
             f"lsmkv kafka: error: the Kafka servers {nowhere} did not answer within 1 s"),
        ],
        "spark": [
            (["spark", "load", "--help"], 0, "--key-col"),
            (["spark", "bench", "--help"], 0, "--engines"),
        ],
        "bench": [
            (["bench", "--help"], 0, "--engines"),
            (["bench", "--engines", "lsm", "--workloads", "fillrandom", "--records", "1000", "--operations", "100",
              "--out", str(tmp_path / "bench-out"), "--quiet"], 0, ""),
        ],
    }


@pytest.mark.slow
@pytest.mark.parametrize("extra", ["kafka", "spark", "bench"])
def test_an_extra_alone_installs_what_its_commands_import(extra, wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
                                f"{wheel}[{extra}]"], capture_output=True, text=True, timeout=1800)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # The venv's own lsmkv, not this work tree's (the tests run with PYTHONPATH set to it).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for args, code, expected in _commands(tmp_path)[extra]:
        done = subprocess.run([str(venv / "bin" / "lsmkv"), *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=600)
        output = done.stdout + done.stderr
        assert done.returncode == code, f"lsmkv {' '.join(args)}: exit {done.returncode}\n{output[-3000:]}"
        assert expected in output, f"lsmkv {' '.join(args)}:\n{output[-3000:]}"
        assert "No module named" not in output and "install the" not in output, output[-3000:]
        if code:
            assert len(done.stderr.splitlines()) == 1, done.stderr
