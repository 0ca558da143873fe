"""Every lsmkv command line ends a failure the same way (lsmkv/terminal/command_errors.py)."""

from __future__ import annotations

import errno

import pytest

from lsmkv.base.errors import CorruptionError
from lsmkv.cli import main as lsmkv_main
from lsmkv.spark.cli import main as spark_main
from lsmkv.terminal.command_errors import describe, run_command


def _raise(exc: BaseException):
    def command() -> int:
        raise exc
    return command


def test_an_lsmkv_error_is_one_line_and_exit_1(capsys):
    assert run_command("lsmkv x", _raise(CorruptionError("block 3 of 000007.sst: checksum mismatch"))) == 1
    assert capsys.readouterr().err == "lsmkv x: error: block 3 of 000007.sst: checksum mismatch\n"


def test_an_os_error_names_its_file(capsys):
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", "/no/such/db")
    assert run_command("lsmkv x", _raise(exc)) == 1
    assert capsys.readouterr().err == "lsmkv x: error: /no/such/db: No such file or directory\n"
    assert describe(OSError(errno.EXDEV, "Invalid cross-device link", "a", None, "b")) == "a: b: Invalid cross-device link"


def test_a_missing_package_names_the_extra_or_is_a_bug(capsys):
    missing = ModuleNotFoundError("No module named 'pyspark'")
    assert run_command("lsmkv spark", _raise(missing), extra="spark") == 1
    assert capsys.readouterr().err == (
        "lsmkv spark: error: No module named 'pyspark'; install the spark extra: pip install 'lsmkv[spark]'\n")
    with pytest.raises(ModuleNotFoundError):
        run_command("lsmkv", _raise(missing))


def test_interrupt_is_130_and_other_exceptions_keep_their_traceback(capsys):
    assert run_command("lsmkv", _raise(KeyboardInterrupt())) == 130
    with pytest.raises(ZeroDivisionError):
        run_command("lsmkv", _raise(ZeroDivisionError("a bug")))
    with pytest.raises(ValueError):
        run_command("lsmkv", _raise(ValueError("not the user's")))
    assert run_command("lsmkv spark", _raise(ValueError("bad rows")), also=(ValueError,)) == 1
    assert capsys.readouterr().err == "lsmkv spark: error: bad rows\n"


def test_the_command_lines_use_it(tmp_path, capsys):
    assert lsmkv_main(["get", str(tmp_path / "absent"), "k"]) == 1
    assert capsys.readouterr().err == f"lsmkv: error: {tmp_path / 'absent'}: no database here (no such directory)\n"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("not a store")
    code = spark_main(["load", "--input", str(tmp_path / "no.parquet"), "--key-col", "k", "--value-col", "v",
                       "--db", str(plain)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"lsmkv spark: error: {plain} is a non-empty directory that is not an lsmkv or btree")
    assert err.count("\n") == 1


def test_lsmkv_kafka_uses_it_too(tmp_path, capsys):
    from lsmkv.kafka.tools.cli import main as kafka_main
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("not a store")
    assert kafka_main(["shards", str(plain)]) == 1
    assert capsys.readouterr().err == f"lsmkv kafka: error: {plain} is not a shard directory (no LSMKV-SHARDS file)\n"
