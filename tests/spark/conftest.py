"""Fixtures of the Spark tests: one real local SparkSession (local[2]) and
helpers that write a store directly through an engine.

The session starts once for the whole run (``getOrCreate``) and is shared
by every module's ``spark`` fixture; without pyspark or a Java runtime the
Spark tests are skipped, not failed.
"""

from __future__ import annotations

import os
import shutil

import pytest


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and os.path.exists(os.path.join(home, "bin", "java"))))


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install lsmkv[spark])")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install lsmkv[spark])")
    if not _java_available():
        pytest.skip("no Java runtime for Spark")
    import lsmkv.spark
    session = lsmkv.spark.session(app_name="lsmkv-tests", master="local[2]")
    yield session


def fill(path: str, engine: str, items: dict[bytes, bytes]) -> None:
    """Write ``items`` into a new store of ``engine`` with plain puts, then flush."""
    import btree
    import lsmkv
    opener = lsmkv.open if engine == "lsm" else btree.open
    with opener(path) as db:
        with db.write_batch() as batch:
            for k, v in items.items():
                batch.put(k, v)
        db.flush()


def contents(path: str) -> dict[bytes, bytes]:
    """Every key and value of the store at ``path``, read directly."""
    from lsmkv.spark.store import detect, open_store
    with open_store(path, detect(path), read_only=True) as db:
        return dict(db.scan())


def leftovers(parent: str) -> list[str]:
    """Staging directories (``.NAME.ingest-*``) and replaced stores left in ``parent``."""
    return sorted(n for n in os.listdir(parent) if ".ingest-" in n or ".overwrite-" in n or ".replaced-" in n)
