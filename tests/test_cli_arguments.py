"""Every command line of lsmkv (`lsmkv`, `lsmkv kafka`, `lsmkv spark`,
`lsmkv bench` and its suites) explains every argument in its --help, and
turns a bad value of any typed argument into one line on stderr and exit
code 2, before doing anything."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

import bench.cli
import lsmkv.cli
import lsmkv.kafka.tools.cli
import lsmkv.spark.cli
from bench.suites import discover, suite_parser

#: Top-level commands dispatched before lsmkv's own parser (they have parsers of their own).
DISPATCHED = {"bench", "kafka", "spark"}


def parsers() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """(the argv prefix that reaches it through `lsmkv`, parser) for every parser of every command."""
    found: list[tuple[list[str], argparse.ArgumentParser]] = []

    def walk(prefix: list[str], parser: argparse.ArgumentParser) -> None:
        found.append((prefix, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if not (prefix == [] and name in DISPATCHED):
                        walk([*prefix, name], sub)

    walk([], lsmkv.cli.build_parser())
    walk(["kafka"], lsmkv.kafka.tools.cli.build_parser())
    walk(["spark"], lsmkv.spark.cli.build_parser())
    walk(["bench"], bench.cli.build_parser())
    walk(["bench", "compare"], bench.cli._compare_parser())
    for name, module in discover().items():
        walk(["bench", "--suite", name], suite_parser(module, f"lsmkv bench --suite {name}", bench.cli._Parser))
    return found


def _arguments(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]


def test_every_argument_of_every_command_has_help_text():
    missing = [f"{' '.join(['lsmkv', *prefix])} {'/'.join(a.option_strings) or a.dest}"
               for prefix, parser in parsers() for a in _arguments(parser)
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []
    assert len(parsers()) > 20  # lsmkv's commands, kafka's, spark's, bench's and its suites


def _required(parser: argparse.ArgumentParser, prefix: list[str]) -> list[str]:
    """Arguments that make a command line complete but for the one under test."""
    args = []
    for a in _arguments(parser):
        if not a.option_strings and a.nargs not in ("?", "*"):
            args.append("x")
        elif a.option_strings and a.required:
            args += [a.option_strings[0], "x"]
    return args


def _bad_value_cases():
    for prefix, parser in parsers():
        for a in _arguments(parser):
            if not a.option_strings or a.nargs == 0:
                continue
            if a.choices is not None:
                bad = "no-such-choice"
            elif a.type is not None:
                bad = "not-a-number"
            else:
                continue
            yield pytest.param(prefix, parser, a.option_strings[0], bad,
                               id=" ".join([*prefix, a.option_strings[0]]) or "lsmkv")


def _exit_code(argv: list[str]) -> int:
    try:
        return lsmkv.cli.main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


@pytest.mark.parametrize("prefix,parser,option,bad", list(_bad_value_cases()))
def test_a_bad_value_of_a_typed_option_is_one_line_and_exit_2(tmp_path, capsys, prefix, parser, option, bad):
    before = os.listdir(tmp_path)
    argv = [*prefix, *_required(parser, prefix), option, bad]
    code = _exit_code(argv)
    out, err = capsys.readouterr()
    assert code == 2, (argv, code, err)
    assert err.count("\n") == 1 and "error" in err and bad in err and "Traceback" not in err, (argv, err)
    assert os.listdir(tmp_path) == before


def test_the_walk_reaches_the_typed_options_of_every_command_line():
    reached = {" ".join([*case.values[0], case.values[2]]) for case in _bad_value_cases()}
    assert {"scan --limit", "sst-dump --limit", "put --engine", "crashtest --cycles", "kafka load --concurrency",
            "kafka query --timeout", "kafka produce --distribution", "spark load --partitions",
            "spark load --engine", "bench --records", "bench compare --threshold",
            "bench --suite timer --seed"} <= reached


@pytest.mark.parametrize("argv", [
    ["scan", "DB", "--limit", "-1"],
    ["kafka", "load", "--topic", "t", "--group", "g", "--db", "DB", "--concurrency", "many"],
    ["kafka", "query", "--group", "g", "--scan", "--timeout", "soon"],
    ["spark", "load", "--input", "x", "--key-col", "k", "--value-col", "v", "--db", "DB", "--partitions", "x"],
    ["bench", "--records", "lots"],
    ["nosuchcommand"],
])
@pytest.mark.subprocess
def test_usage_errors_through_the_console_script_are_one_line_and_exit_2(tmp_path, argv):
    argv = [a.replace("DB", str(tmp_path / "db")) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "lsmkv.cli", *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and "error" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "db").exists()
