"""The `lsmkv` command line: commands, output, exit codes, one-line errors,
closed pipes, what creates a database, and the encoding of keys and values."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsmkv
import lsmkv.terminal.textcodec
from lsmkv.cli import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_put_get_delete_scan(tmp_path, capsys):
    db = str(tmp_path / "db")
    assert run(capsys, "put", db, "user:1", "alice")[0] == 0
    assert run(capsys, "put", db, "user:2", "bob")[0] == 0
    assert run(capsys, "put", db, "other", "x")[0] == 0
    assert run(capsys, "get", db, "user:1") == (0, "alice\n", "")
    code, out, err = run(capsys, "get", db, "user:9")
    assert code == 1 and "not found" in err
    assert run(capsys, "scan", db, "--prefix", "user:")[1] == "user:1\talice\nuser:2\tbob\n"
    assert run(capsys, "scan", db, "--reverse", "--limit", "1")[1] == "user:2\tbob\n"
    assert run(capsys, "delete", db, "user:1")[0] == 0
    assert run(capsys, "scan", db)[1] == "other\tx\nuser:2\tbob\n"
    assert run(capsys, "put", db, "--hex", "00ff", "0a0b")[0] == 0
    assert run(capsys, "get", db, "--hex", "00ff")[1] == "0a0b\n"


def test_stats_check_and_sst_dump(tmp_path, capsys):
    db = str(tmp_path / "db")
    with lsmkv.open(db) as d:
        for i in range(100):
            d.put(b"k%03d" % i, b"v%03d" % i)
        d.delete(b"k050")
        d.flush()
    code, out, _ = run(capsys, "stats", db, "--json")
    stats = json.loads(out)
    assert code == 0 and stats["engine"] == "lsm" and stats["files_per_level"][0] == 1
    code, out, _ = run(capsys, "check", db)
    assert code == 0 and "OK" in out and "entries: 100" in out  # k050: only its tombstone was flushed
    table = os.path.join(db, [n for n in os.listdir(db) if n.endswith(".sst")][0])
    code, out, _ = run(capsys, "sst-dump", table)
    assert code == 0
    assert "entries: 100" in out and "tombstones: 1" in out and "bloom:" in out and "index:" in out
    assert "k050 @101 delete" in out and "k049 @50 put v049" in out
    code, out, _ = run(capsys, "sst-dump", table, "--json", "--limit", "2")
    dump = json.loads(out)
    assert len(dump["entries"]) == 2 and dump["properties"]["entries"] == 100


def test_check_reports_corruption_with_exit_code_1(tmp_path, capsys):
    db = str(tmp_path / "db")
    with lsmkv.open(db, compression=None) as d:
        for i in range(500):
            d.put(b"k%04d" % i, b"v" * 30)
        d.flush()
    table = os.path.join(db, [n for n in os.listdir(db) if n.endswith(".sst")][0])
    with open(table, "r+b") as f:
        f.seek(50)
        f.write(b"\xde\xad")
    code, out, _ = run(capsys, "check", db)
    assert code == 1
    assert "PROBLEM" in out and "checksum mismatch" in out and table in out and "FAILED" in out


def test_errors_are_one_line_not_tracebacks(tmp_path, capsys):
    code, out, err = run(capsys, "get", str(tmp_path / "none"), "k")
    assert code == 1 and err.startswith("lsmkv: error:") and err.count("\n") == 1
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = run(capsys, "put", str(f), "k", "v")
    assert code == 1 and "is a file" in err and "Traceback" not in err
    code, _, err = run(capsys, "sst-dump", str(f))
    assert code == 1 and "too short to be a table" in err


@pytest.mark.subprocess
def test_demo_and_console_script(tmp_path, capsys):
    code, out, _ = run(capsys, "demo", str(tmp_path / "demo"), "--keys", "3000")
    assert code == 0 and "wrote 3000 keys" in out and "user:00000001" in out
    exe = shutil.which("lsmkv", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.fail("the lsmkv console script is not installed next to the interpreter")
    proc = subprocess.run([exe, "get", str(tmp_path / "demo"), "user:00000002"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout == "value-2\n"


# ---------------------------------------------------------------------------
# A Unix tool: closed pipes, creation, --engine, --version, the encoding
# ---------------------------------------------------------------------------

CLI = [sys.executable, "-m", "lsmkv.cli"]


def filled(path, n: int, engine: str = "lsm") -> str:
    module = lsmkv if engine == "lsm" else __import__("btree")
    with module.open(str(path)) as d:
        for i in range(n):
            d.put(b"key:%06d" % i, b"value-%06d-" % i + b"x" * 40)
    return str(path)


@pytest.mark.subprocess
def test_a_reader_that_goes_away_ends_scan_quietly_with_exit_0(tmp_path):
    """`lsmkv scan DB | head -1`: head reads a line and closes the pipe while
    the scan still has most of its 10,000 lines (about 600 KB, far more than
    a pipe holds) to write."""
    db = filled(tmp_path / "db", 10_000)
    for form in ([], ["--json"], ["--hex"]):
        proc = subprocess.Popen([*CLI, "scan", db, *form], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
        assert err == b"" and first.startswith(b"key:000000" if not form else b'{"key": "' if form == ["--json"]
                                                else b"6b65793a303030303030\t")


@pytest.mark.parametrize("command", [
    ["stats", "{db}"], ["stats", "{db}", "--json"], ["get", "{db}", "key:000001"], ["scan", "{db}", "--limit", "3"],
    ["check", "{db}"], ["sst-dump", "{table}"], ["--version"], ["scan", "--help"], ["bench", "list"],
    ["kafka", "--help"], ["spark", "--help"],
])
@pytest.mark.subprocess
def test_a_stdout_already_closed_ends_every_command_quietly_with_exit_0(tmp_path, command):
    """A pipe whose reading end is closed before the command starts: its
    first write fails, whatever it prints and however little."""
    db = filled(tmp_path / "db", 300)
    with lsmkv.open(db) as d:
        d.flush()
    table = os.path.join(db, next(n for n in os.listdir(db) if n.endswith(".sst")))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([*CLI, *(a.format(db=db, table=table) for a in command)], stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr


@pytest.mark.subprocess
def test_only_a_closed_stdout_is_quiet_a_broken_pipe_elsewhere_is_an_error():
    """is_closed_stdout tells stdout's own EPIPE from another one (a socket
    whose peer went away): the latter is reported like any OSError."""
    code = ("import sys; from lsmkv.terminal.closed_pipe import is_closed_stdout; "
            "sys.stderr.write(repr(is_closed_stdout(BrokenPipeError())) + repr(is_closed_stdout(OSError())))")
    with_reader = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 timeout=60)
    assert with_reader.stderr == b"FalseFalse"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        without_reader = subprocess.run([sys.executable, "-c", code], stdout=write_end, stderr=subprocess.PIPE,
                                        timeout=60)
    finally:
        os.close(write_end)
    assert without_reader.stderr == b"TrueFalse"


@pytest.mark.parametrize("command", [
    ["get", "{path}", "k"], ["delete", "{path}", "k"], ["delete", "{path}", "k", "--engine", "btree"],
    ["scan", "{path}"], ["stats", "{path}"], ["stats", "{path}", "--json"], ["check", "{path}"],
    ["repair", "{path}"], ["sst-dump", "{path}"],
])
def test_commands_that_do_not_create_fail_on_a_missing_database_and_create_nothing(tmp_path, capsys, command):
    missing = tmp_path / "missing"
    code, out, err = run(capsys, *(a.format(path=missing) for a in command))
    assert code == 1 and out == "" and err.count("\n") == 1 and str(missing) in err, err
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run(capsys, *(a.format(path=empty) for a in command))
    assert code == 1 and out == "" and err.count("\n") == 1 and str(empty) in err, err
    assert os.listdir(empty) == []


def test_delete_on_a_missing_database_leaves_no_database_behind(tmp_path, capsys):
    """Once, `lsmkv delete MISSING k` made a database holding a tombstone."""
    missing = str(tmp_path / "missing")
    code, _, err = run(capsys, "delete", missing, "k")
    assert code == 1 and "no database here (no such directory)" in err
    assert run(capsys, "stats", missing)[0] == 1 and not os.path.exists(missing)


@pytest.mark.parametrize("engine", ["lsm", "btree"])
def test_put_creates_the_database_of_the_engine_asked_for(tmp_path, capsys, engine):
    db = str(tmp_path / "new" / "db")
    assert run(capsys, "put", db, "k", "v", "--engine", engine) == (0, "", "")
    code, out, _ = run(capsys, "stats", db, "--json")
    assert code == 0 and json.loads(out)["engine"] == engine
    assert run(capsys, "get", db, "k") == (0, "v\n", "")


@pytest.mark.parametrize("found,given", [("lsm", "btree"), ("btree", "lsm")])
def test_an_engine_that_disagrees_with_the_directory_is_an_error_naming_both(tmp_path, capsys, found, given):
    db = filled(tmp_path / "db", 3, engine=found)
    for command in (["put", db, "new", "v"], ["delete", db, "key:000001"]):
        code, out, err = run(capsys, *command, "--engine", given)
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert f"{db} is {'an' if found == 'lsm' else 'a'} {found} database, not {given}" in err
        assert f"--engine {given}" in err
    code, out, _ = run(capsys, "scan", db)
    assert code == 0 and out.count("\n") == 3 and "new\t" not in out  # nothing was written
    assert run(capsys, "put", db, "new", "v", "--engine", found)[0] == 0  # the right engine is fine


@pytest.mark.subprocess
def test_version_prints_the_installed_package_version_and_the_build_that_runs():
    from importlib.metadata import version

    from lsmkv.base.build import BUILD
    proc = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"lsmkv {version('lsmkv')}, {BUILD.describe()}\n"
    assert ("compiled (Cython" if BUILD.compiled else "pure Python") in proc.stdout


def test_sst_dump_of_a_directory_or_a_missing_file_names_the_path(tmp_path, capsys):
    code, _, err = run(capsys, "sst-dump", str(tmp_path))
    assert code == 1 and err == f"lsmkv: error: {tmp_path} is a directory, not a table file " \
                                "(lsmkv check verifies a whole database)\n"
    code, _, err = run(capsys, "sst-dump", str(tmp_path / "000001.sst"))
    assert code == 1 and err == f"lsmkv: error: {tmp_path / '000001.sst'}: No such file or directory\n"


@pytest.mark.parametrize("command", [["scan", "{db}", "--limit", "-1"], ["sst-dump", "{db}/x.sst", "--limit", "-5"],
                                     ["scan", "{db}", "--limit", "1.5"], ["demo", "{db}", "--keys", "-1"]])
def test_a_negative_count_is_a_usage_error(tmp_path, capsys, command):
    db = filled(tmp_path / "db", 3)
    with pytest.raises(SystemExit) as exc:
        main([a.format(db=db) for a in command])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"lsmkv {command[0]}: error: argument --" in err
    assert run(capsys, "scan", db, "--limit", "0") == (0, "", "")


def test_a_key_that_is_not_a_valid_encoding_is_a_usage_error_and_changes_nothing(tmp_path, capsys):
    db = filled(tmp_path / "db", 3)
    for command in (["put", db, "a\\q", "v"], ["put", db, "k", "v\\"], ["put", db, "--hex", "00", "0g"],
                    ["delete", db, "key\\"], ["scan", db, "--start", "\\x1"], ["get", db, "\\"]):
        with pytest.raises(SystemExit) as exc:
            main(command)
        out, err = capsys.readouterr()
        assert exc.value.code == 2 and out == "" and err.count("\n") == 1, (command, err)
        assert err.startswith(f"lsmkv {command[0]}: error: argument ") and "Traceback" not in err
    assert run(capsys, "scan", db)[1].count("\n") == 3


@pytest.mark.subprocess
def test_typed_keys_and_values_use_the_printed_encoding(tmp_path, capsys):
    """What scan prints can be typed back: bytes no shell argument can hold
    (NUL), tabs, newlines, backslashes, and raw bytes that are not UTF-8
    (these through a child process, whose argv holds them as they are)."""
    db = str(tmp_path / "db")
    assert run(capsys, "put", db, "a\\x00b\\tc\\nd", "back\\\\slash\\r\\xff") == (0, "", "")
    assert run(capsys, "put", db, "--hex", "0a0a", "") == (0, "", "")
    proc = subprocess.run([*CLI, "put", db, b"raw-\xff\xfe", "caf\u00e9"], capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    with lsmkv.open(db, read_only=True) as d:
        assert dict(d.items()) == {b"a\x00b\tc\nd": b"back\\slash\r\xff", b"raw-\xff\xfe": "café".encode(),
                                   b"\n\n": b""}
    proc = subprocess.run([*CLI, "scan", db], capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout == b"\\n\\n\t\na\\x00b\\tc\\nd\tback\\\\slash\\r\\xff\nraw-\\xff\\xfe\tcaf\\xc3\\xa9\n"
    assert run(capsys, "get", db, "a\\x00b\\tc\\nd") == (0, "back\\\\slash\\r\\xff\n", "")
    assert run(capsys, "get", db, "raw-\\xFF\\xfe") == (0, "caf\\xc3\\xa9\n", "")
    code, out, _ = run(capsys, "get", db, "--json", "--hex", "0a0a")
    assert code == 0 and json.loads(out) == {"key": "0a0a", "value": ""}
    code, out, _ = run(capsys, "get", db, "--json", "nothing")
    assert code == 1 and json.loads(out) == {"key": "nothing", "value": None}
    assert run(capsys, "delete", db, "\\n\\n") == (0, "", "")
    code, out, _ = run(capsys, "scan", db, "--prefix", "raw-\\xff", "--json")
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [
        {"key": "raw-\\xff\\xfe", "value": "caf\\xc3\\xa9"}]


def _parsed(output: bytes, form: list[str]) -> list[tuple[bytes, bytes]]:
    from lsmkv.terminal.textcodec import decode
    to_bytes = bytes.fromhex if "--hex" in form else decode
    lines = output.decode("ascii").split("\n")
    assert lines[-1] == ""
    if "--json" in form:
        return [(to_bytes(o["key"]), to_bytes(o["value"])) for o in map(json.loads, lines[:-1])]
    return [tuple(map(to_bytes, line.split("\t"))) for line in lines[:-1]]


@pytest.mark.subprocess
@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.dictionaries(st.binary(min_size=1, max_size=30), st.binary(max_size=50), min_size=1, max_size=60))
def test_scan_output_gives_back_random_binary_entries_in_every_form(tmp_path_factory, table):
    """Through the real command (a child process): one line an entry, and
    decoding gives the bytes back, plain, --hex, --json and --json --hex."""
    db = str(tmp_path_factory.mktemp("binary") / "db")
    with lsmkv.open(db) as d:
        for key, value in table.items():
            d.put(key, value)
    for form in ([], ["--hex"], ["--json"], ["--json", "--hex"]):
        proc = subprocess.run([*CLI, "scan", db, *form], capture_output=True, timeout=60)
        assert proc.returncode == 0 and proc.stderr == b""
        assert proc.stdout.count(b"\n") == len(table)
        assert _parsed(proc.stdout, form) == sorted(table.items())
    key = max(table)
    proc = subprocess.run([*CLI, "get", db, lsmkv.terminal.textcodec.encode(key)], capture_output=True, timeout=60)
    assert lsmkv.terminal.textcodec.decode(proc.stdout.decode("ascii").removesuffix("\n")) == table[key]


def test_crashtest_arguments_are_checked_before_its_work_directory_is_made(tmp_path, capsys, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the default work directory would go
    code, out, err = run(capsys, "crashtest", "--engine", "lsm", "--cycles", "0")
    assert code == 1 and out == "" and err == "lsmkv: error: cycles must be at least 1, not 0\n"
    assert os.listdir(tmp_path) == []
