"""Spark: bulk ingest through the Spark data source against the put loop,
into both engines, then parallel reads and a full read back (the suite
itself lives in lsmkv/spark/bench.py, beside the jobs it measures, and is
also ``lsmkv spark bench``; docs/spark.md has the figures)."""

from lsmkv.spark.bench import DESCRIPTION, NAME, add_arguments, run  # noqa: F401
