"""A local SparkSession for lsmkv, and registering the data source.

``session()`` builds (or returns the running) SparkSession with the Python
workers running this interpreter: PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON
are set in the environment before the JVM starts (and
``spark.pyspark.python``), so every task imports the same lsmkv. It sets
few shuffle partitions, quiet logs and Python filter pushdown on, and
registers the source. ``register()`` registers the source with any
session (a cluster's too) and turns Python filter pushdown on, which the
source's reader needs (``spark.sql.python.filterPushdown.enabled``).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def register(spark: Any) -> None:
    """Register format "lsmkv" with ``spark``: reads default to
    ``spark.sparkContext.defaultParallelism`` partitions."""
    from .source import LsmkvDataSource
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: the source falls back to the CPU count
        parallelism = None
    source = type("LsmkvDataSource", (LsmkvDataSource,), {"default_partitions": parallelism,
                                                           "__module__": __name__})
    spark.dataSource.register(source)


def session(app_name: str = "lsmkv", master: str = "local[2]", **conf: Any) -> Any:
    """A SparkSession (``getOrCreate``) for ``master`` with the lsmkv
    source registered. Keyword arguments are Spark settings with dots
    written as underscores or given as a dict: ``session(**{"spark.driver.memory": "2g"})``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if master.startswith("local"):
        # Quiet from the JVM's first line: errors only (a log4j2 file given
        # at launch; setLogLevel comes too late for the start-up warnings),
        # and the loopback address without the warning about guessing it.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if "PYSPARK_SUBMIT_ARGS" not in os.environ:
            os.environ["PYSPARK_SUBMIT_ARGS"] = (f"--driver-java-options -Dlog4j.configurationFile={_log_config()} "
                                                 "pyspark-shell")
    from pyspark.sql import SparkSession

    settings = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": str(_cores(master) or 2),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.python.filterPushdown.enabled": "true",
    }
    settings.update({(k if "." in k else k.replace("_", ".")): str(v) for k, v in conf.items()})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log_config() -> str:
    """A log4j2 configuration of errors only, written once per user to the temp directory."""
    import tempfile
    path = os.path.join(tempfile.gettempdir(), f"lsmkv-spark-log4j2-{os.getuid()}.properties")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(_LOG4J2)
        os.replace(tmp, path)
    return path


def _cores(master: str) -> int | None:
    if master.startswith("local[") and master.endswith("]"):
        inner = master[6:-1].split(",")[0]
        if inner == "*":
            return os.cpu_count()
        try:
            return int(inner)
        except ValueError:
            return None
    return None
