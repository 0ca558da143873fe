"""Every example of README.md and docs/*.md runs as written and prints what
the page shows (tests/docs_examples.py says which blocks run and how
outputs and marks are written).

Each page runs in a child process of its own (one fresh namespace for all
its blocks, in order) in a fresh temporary directory, with ``lsmkv`` on
PATH being this checkout's command line. A block marked ``<!-- not run:
REASON -->`` is skipped by that mark alone; pages with a block marked
``<!-- needs: kafka -->`` or ``<!-- needs: spark -->`` run in tests
marked kafka or spark.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from docs_examples import (KAFKA_ADDRESS, NEEDS, RUN_LANGUAGES, Block, console_commands,  # noqa: E402
                           output_matches, parse_page, python_output_checks)

RUNNER = os.path.join(HERE, "docs_examples.py")
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def page_blocks(page: str) -> list[Block]:
    return parse_page(os.path.join(ROOT, page), page)[0]


def _page_param(page: str):
    """A page to run, marked slow (a page runs for seconds in an interpreter
    of its own) and kafka or spark as its blocks need."""
    needs = set().union(*(b.needs for b in page_blocks(page) if b.runs))
    marks = [pytest.mark.slow] + [getattr(pytest.mark, need) for need in sorted(needs)]
    return pytest.param(page, marks=marks, id=page)


RUN_PAGES = [_page_param(p) for p in PAGES if any(b.runs for b in page_blocks(p))]


def _lsmkv_command(directory: str) -> str:
    """A folder holding an ``lsmkv`` command that runs this checkout's CLI
    with the test's interpreter."""
    os.makedirs(directory)
    path = os.path.join(directory, "lsmkv")
    with open(path, "w") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m lsmkv.cli "$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def run_page(blocks: list[Block], workdir: str, bin_dir: str, kafka: str | None = None,
             timeout: float = 300) -> tuple[list[Block], list[dict], str]:
    """Run the blocks that run, in order, in one child process with
    ``workdir`` as its working directory: (blocks run, their results,
    the child's own output)."""
    todo = [b for b in blocks if b.runs]
    payload = []
    for b in todo:
        code = b.code.replace(KAFKA_ADDRESS, kafka) if kafka else b.code
        item = {"name": b.name, "page": b.page, "line": b.line, "language": b.language, "code": code}
        if b.language == "console":
            item["commands"] = [(line, cmd, out) for line, cmd, out in console_commands(
                Block(b.page, b.language, code, b.line))]
        payload.append(item)
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = bin_dir + os.pathsep + os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "100"
    result_path = os.path.join(os.path.dirname(workdir), "results.json")
    proc = subprocess.run([sys.executable, RUNNER, result_path], input=json.dumps(payload), cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"the example runner failed:\n{proc.stdout}\n{proc.stderr}"
    with open(result_path, encoding="utf-8") as f:
        results = json.load(f)
    return todo, results, proc.stdout + proc.stderr


def check_page(blocks: list[Block], workdir: str, bin_dir: str, kafka: str | None = None) -> int:
    """Run a page's blocks and assert that each ran and printed what the
    page shows; the number of outputs compared."""
    todo, results, child_output = run_page(blocks, workdir, bin_dir, kafka)
    for block, result in zip(todo, results):
        assert not result["error"], f"the example at {block.name} failed:\n{result['error']}\n{child_output}"
    assert len(results) == len(todo)
    checked, problems = 0, []
    for block, result in zip(todo, results):
        if block.language == "python":
            n, mismatches = python_output_checks(block, [tuple(p) for p in result["printed"]])
            checked += n
            problems += [str(m) for m in mismatches]
        else:
            for (line, cmd, expected), actual in zip(console_commands(block), result["outputs"]):
                checked += 1
                if not output_matches(expected, actual):
                    problems.append(f"{block.page}:{line}: `$ {cmd}` shows\n{expected}printed\n{actual}")
    assert not problems, "\n\n".join(problems)
    return checked


@pytest.mark.parametrize("page", RUN_PAGES)
def test_the_examples_of_the_page_run_and_print_what_it_shows(page, tmp_path, request):
    blocks = page_blocks(page)
    workdir = tmp_path / "work"
    workdir.mkdir()
    bin_dir = _lsmkv_command(str(tmp_path / "bin"))
    needs = set().union(*(b.needs for b in blocks if b.runs))
    if "spark" in needs:
        pytest.importorskip("pyspark", reason="pyspark is not installed (pip install lsmkv[spark])")
        if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
            pytest.skip("no Java runtime for Spark")
    if "kafka" in needs:
        pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (pip install lsmkv[kafka])")
        from lsmkv.kafka import EmbeddedBroker
        with EmbeddedBroker() as broker:
            check_page(blocks, str(workdir), bin_dir, kafka=broker.bootstrap_servers)
    else:
        check_page(blocks, str(workdir), bin_dir)


@pytest.mark.parametrize("page", PAGES)
def test_every_mark_of_the_page_is_well_formed_and_stands_before_a_block(page):
    blocks, orphans = parse_page(os.path.join(ROOT, page), page)
    problems = [f"{page}:{m.line}: a `{m.kind}` mark stands before no code block" for m in orphans]
    for block in blocks:
        for mark in block.marks:
            where = f"{page}:{mark.line}"
            if not mark.well_formed:
                problems.append(f"{where}: a `{mark.kind}` mark needs `: REASON` (<!-- {mark.kind}: ... -->)")
            elif mark.kind == "needs" and mark.text not in NEEDS:
                problems.append(f"{where}: `needs: {mark.text}`; known needs: {', '.join(NEEDS)}")
            if mark.kind == "not run" and block.language not in RUN_LANGUAGES:
                problems.append(f"{where}: a `not run` mark before a ```{block.language} block, which never runs")
    assert not problems, "\n".join(problems)


# -- the checker itself ------------------------------------------------------------

def _write_page(tmp_path, text: str) -> list[Block]:
    path = tmp_path / "page.md"
    path.write_text(text)
    return parse_page(str(path))[0]


@pytest.mark.subprocess
def test_a_comment_that_is_not_what_the_statement_prints_fails_the_page(tmp_path):
    blocks = _write_page(tmp_path, "```python\nx = b'bob'\nprint(x)       # b'bob'\nprint(x * 2)   # b'bob'\n"
                                   "print(len(x))  # a length\nx.upper()      # not printed, not compared\n```\n")
    (tmp_path / "work").mkdir()
    with pytest.raises(AssertionError) as failure:
        check_page(blocks, str(tmp_path / "work"), _lsmkv_command(str(tmp_path / "bin")))
    message = str(failure.value)
    assert "page.md:4: shows \"b'bob'\", printed \"b'bobbob'\"" in message
    assert "page.md:5: shows 'a length', printed '3'" in message
    assert "page.md:3" not in message and "page.md:6" not in message


@pytest.mark.subprocess
def test_a_console_block_runs_its_commands_in_order_and_compares_their_output(tmp_path):
    good = _write_page(tmp_path, "```console\n$ printf 'a\\nb\\nc\\n'; false\na\n...\nc\n$ echo $?\n1\n"
                                 "$ echo took 1.5 s\ntook ... s\n$ lsmkv --help | head -1\nusage: lsmkv ...\n```\n")
    (tmp_path / "work").mkdir()
    bin_dir = _lsmkv_command(str(tmp_path / "bin"))
    assert check_page(good, str(tmp_path / "work"), bin_dir) == 4
    bad = _write_page(tmp_path, "```console\n$ echo $((1 + 1))\n3\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:2: `\$ echo \$\(\(1 \+ 1\)\)` shows\s+3\s+printed\s+2"):
        check_page(bad, str(tmp_path / "work"), bin_dir)


@pytest.mark.subprocess
def test_a_failing_example_fails_the_page_and_the_blocks_after_it_do_not_run(tmp_path):
    blocks = _write_page(tmp_path, "```python\nopen('first', 'w').close()\nraise RuntimeError('boom')\n```\n\n"
                                   "```python\nopen('second', 'w').close()\n```\n")
    (tmp_path / "work").mkdir()
    with pytest.raises(AssertionError, match=r'page.md:2 failed:(.|\n)*File "page.md", line 3(.|\n)*RuntimeError: boom'):
        check_page(blocks, str(tmp_path / "work"), _lsmkv_command(str(tmp_path / "bin")))
    assert os.listdir(tmp_path / "work") == ["first"]


def test_marks_skip_blocks_and_a_mark_without_a_reason_is_found(tmp_path):
    blocks = _write_page(tmp_path, "<!-- not run: needs a Spark cluster -->\n\n```python\nraise SystemExit(1)\n```\n"
                                   "<!-- not run -->\n```python\nx = 1\n```\n<!-- needs: kafka -->\n```python\nx = 2\n```\n"
                                   "```sh\nrm -rf /\n```\n")
    assert [b.skip_reason for b in blocks] == ["needs a Spark cluster", "", None, None]
    assert [b.runs for b in blocks] == [False, False, True, False]
    assert [m.well_formed for m in blocks[1].marks] == [False] and blocks[2].needs == {"kafka"}
    text = "<!-- not run: gone -->\n\nsome text\n\n```python\nx = 1\n```\n"
    (tmp_path / "orphan.md").write_text(text)
    blocks, orphans = parse_page(str(tmp_path / "orphan.md"))
    assert [m.text for m in orphans] == ["gone"] and blocks[0].runs
