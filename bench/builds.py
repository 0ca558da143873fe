"""The pure build beside the compiled one, in the main run's report.

When the compiled build runs (lsmkv/base/build.py), `lsmkv bench` (with
``--builds both``, its default) runs the project's engines a second time in
a child process with ``LSMKV_NO_EXTENSIONS=1``, on the same seeded data and
settings, and adds its rows as the engines ``lsm-pure`` and ``btree-pure``:
the report then shows, row by row, what compiling buys. The child is a plain
``lsmkv bench`` with ``--builds this``, its results in ``<out>/pure``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from lsmkv.base.build import BUILD, NO_EXTENSIONS

#: The engines that have a pure build to run beside the compiled one.
PROJECT_ENGINES = ("lsm", "btree")
#: The suffix of an engine's name in the rows of its pure build.
PURE_SUFFIX = "-pure"


def pure_engines(chosen: list[str], builds: str) -> list[str]:
    """The project's engines among ``chosen`` to run again on the pure build:
    none unless ``builds`` is "both" and this process runs the compiled build."""
    if builds != "both" or not BUILD.compiled:
        return []
    return [name for name in chosen if name in PROJECT_ENGINES]


def run_pure(argv: list[str], engines: list[str], out: str, db_dir: str | None) -> dict[str, Any]:
    """Run ``lsmkv bench ARGV`` for ``engines`` on the pure build; its results
    document, its engines and runs renamed ``<engine>-pure``. A child that
    fails gives an engine entry holding its error, and no runs."""
    pure_out = os.path.join(out, "pure")
    child = [sys.executable, "-m", "lsmkv.cli", "bench", *argv, "--engines", ",".join(engines),
             "--out", pure_out, "--builds", "this", "--no-plots", "--quiet"]
    if db_dir:
        child += ["--db-dir", os.path.join(db_dir, "pure")]
    env = dict(os.environ, **{NO_EXTENSIONS: "1"})
    done = subprocess.run(child, env=env, capture_output=True, text=True, check=False)
    try:
        with open(os.path.join(pure_out, "results.json")) as file:
            doc = json.load(file)
    except (OSError, ValueError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"engines": [{"engine": name + PURE_SUFFIX, "title": "pure build", "version": "", "settings": {},
                             "notes": [], "error": f"the pure build's run failed: {tail[0]}", "skipped": []}
                            for name in engines], "runs": [], "loads": []}
    for key in ("engines", "runs", "loads"):
        for entry in doc.get(key, []):
            entry["engine"] = entry["engine"] + PURE_SUFFIX
    return doc


def build_table_rows(doc: dict[str, Any]) -> list[tuple[str, str, float, float]]:
    """(engine, workload, compiled ops/s, pure ops/s) for each row both builds ran."""
    rates = {(r["engine"], r["workload"]): r["ops_per_sec"] for r in doc.get("runs", [])}
    rows = []
    for (engine, workload), rate in rates.items():
        pure = rates.get((engine + PURE_SUFFIX, workload))
        if engine in PROJECT_ENGINES and pure:
            rows.append((engine, workload, rate, pure))
    return rows
