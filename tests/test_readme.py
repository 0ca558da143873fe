"""The README's example runs as printed (in a temporary folder) and prints
what its comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_readme_example_runs_and_prints_what_it_says(tmp_path):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    code = code.replace("/tmp/example-db", str(tmp_path / "example-db"))
    code = code.replace("/tmp/example-shelf", str(tmp_path / "example-shelf"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    promised = [m.group(1) for m in re.finditer(r"# (b'.*|\[.*\])$", code, re.M)]
    assert promised and printed[:len(promised)] == promised
