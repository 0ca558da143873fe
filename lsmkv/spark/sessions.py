"""A local SparkSession for lsmkv, and registering the data source.

``session()`` builds (or returns the running) SparkSession with the Python
workers running this interpreter: PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON
are set in the environment before the JVM starts (and
``spark.pyspark.python``), so every task imports the same lsmkv. It sets
quiet logs and Python filter pushdown on, and registers the source. For a
local master it also sets the parallelism to the master's cores and few
shuffle partitions (:func:`local_settings`); a cluster master keeps
Spark's own, which follow the cores of the executors that register.

``register()`` registers the source with any session (a cluster's too)
and turns Python filter pushdown on, which the source's reader needs
(``spark.sql.python.filterPushdown.enabled``). The source carries the
session's ``defaultParallelism`` as it is at that moment, the default
number of partitions of a read; on a cluster it first waits (at most
``spark.scheduler.maxRegisteredResourcesWaitingTime``, 30 s by default)
for an executor to register, as before that Spark counts 2.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from lsmkv.base.cache_size import memory_share

log = logging.getLogger(__name__)

#: Shuffle partitions of a local session (Spark's default, 200, is for clusters).
LOCAL_SHUFFLE_PARTITIONS = 4
#: A local session's JVM heap (``spark.driver.memory``; the driver is the
#: executor): this fraction of physical memory, within Spark's default of
#: 1 GiB and a ceiling. With Spark's 1 GiB, a bulk load's sort of 5,000,000
#: rows on two cores spilled 368 MiB to disk (docs/performance.md).
LOCAL_DRIVER_MEMORY_FRACTION = 4
LOCAL_DRIVER_MEMORY_MIN = 1024 * 1024 * 1024
LOCAL_DRIVER_MEMORY_MAX = 8 * 1024 * 1024 * 1024


def register(spark: Any) -> None:
    """Register format "lsmkv" with ``spark``: reads default to
    ``spark.sparkContext.defaultParallelism`` partitions (on a cluster,
    once an executor has registered)."""
    from .source import LsmkvDataSource
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        parallelism = _parallelism(spark.sparkContext)
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
    if is_local(master):
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
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.python.filterPushdown.enabled": "true",
        **local_settings(master),
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


def is_local(master: str) -> bool:
    """Does ``master`` run Spark in this process (local, local[N], local[N,F], local[*])?"""
    return master == "local" or master.startswith("local[")


def local_settings(master: str) -> dict[str, str]:
    """The settings ``session()`` adds for ``master``: for a local master,
    its cores as the default parallelism, few shuffle partitions and a
    heap sized by the machine's memory (:func:`local_driver_memory`); for
    any other master none (Spark's defaults follow the cluster)."""
    if not is_local(master):
        return {}
    return {"spark.default.parallelism": str(local_cores(master)),
            "spark.sql.shuffle.partitions": str(LOCAL_SHUFFLE_PARTITIONS),
            "spark.driver.memory": local_driver_memory()}


def local_driver_memory(memory: int | None = None) -> str:
    """A local session's ``spark.driver.memory``, in MiB: a quarter of
    physical memory (``memory`` bytes, default this machine's), at least
    1 GiB and at most 8 GiB. It takes effect when the session starts the
    JVM (not on a session already running)."""
    size = memory_share(LOCAL_DRIVER_MEMORY_FRACTION, LOCAL_DRIVER_MEMORY_MIN, LOCAL_DRIVER_MEMORY_MAX, memory)
    return f"{size >> 20}m"


def local_cores(master: str) -> int:
    """The cores (worker threads) of a local master: 1 for ``local``, N for
    ``local[N]`` and ``local[N,F]``, the CPU count for ``local[*]``."""
    if master == "local":
        return 1
    inner = master[len("local["):].rstrip("]").split(",")[0].strip()
    if inner == "*":
        return os.cpu_count() or 1
    try:
        cores = int(inner)
    except ValueError:
        raise ValueError(f"Spark master {master!r}: expected local, local[N], local[N,F] or local[*]") from None
    if cores < 1:
        raise ValueError(f"Spark master {master!r}: expected at least one core")
    return cores


def _parallelism(sc: Any) -> int:
    """``sc.defaultParallelism``, on a cluster once an executor has
    registered (before that Spark counts 2 whatever the cluster)."""
    if not is_local(sc.master) and not sc.getConf().contains("spark.default.parallelism"):
        wait = _seconds(sc.getConf().get("spark.scheduler.maxRegisteredResourcesWaitingTime", "30s"))
        deadline = time.monotonic() + wait
        while _executors(sc) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        if _executors(sc) == 0:
            log.warning("no executor registered with %s within %.0f s; reads default to %d partitions",
                        sc.master, wait, sc.defaultParallelism)
    return int(sc.defaultParallelism)


def _executors(sc: Any) -> int:
    """Executors registered with the driver (the driver itself not counted)."""
    return max(0, int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1)


def _seconds(text: str) -> float:
    text = text.strip().lower()
    for unit, scale in (("ms", 0.001), ("s", 1.0), ("min", 60.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(unit):
            try:
                return float(text[:-len(unit)]) * scale
            except ValueError:
                break
    try:
        return float(text) / 1000.0  # Spark reads a bare number of this setting as milliseconds
    except ValueError:
        return 30.0
