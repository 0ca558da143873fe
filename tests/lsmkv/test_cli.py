"""The `lsmkv` command line: commands, output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import lsmkv
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


def test_demo_and_console_script(tmp_path, capsys):
    code, out, _ = run(capsys, "demo", str(tmp_path / "demo"), "--keys", "3000")
    assert code == 0 and "wrote 3000 keys" in out and "user:00000001" in out
    exe = shutil.which("lsmkv", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.fail("the lsmkv console script is not installed next to the interpreter")
    proc = subprocess.run([exe, "get", str(tmp_path / "demo"), "user:00000002"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout == "value-2\n"
