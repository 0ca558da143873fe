"""The data source class Spark sees: ``format("lsmkv")``.

It owns only the source's name, its schema (``key``/``value``: binary,
or string with option ``decode``) and handing out the reader (reader.py)
and writer (writer.py) with parsed options (options.py). Spark creates it
from the options of each read or write; ``register()`` (sessions.py)
registers a subclass that carries the session's default parallelism, the
default number of partitions of a read.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from .options import ReadOptions, WriteOptions


class LsmkvDataSource(DataSource):
    #: Partitions of a read without option numPartitions (set by register()).
    default_partitions: int | None = None

    @classmethod
    def name(cls) -> str:
        return "lsmkv"

    def schema(self) -> str:
        kind = "string" if self.options.get("decode") else "binary"
        return f"key {kind}, value {kind}"

    def reader(self, schema: Any):
        from .reader import LsmkvPushdownReader, LsmkvReader, check_schema
        options = ReadOptions.parse(self.options)
        check_schema(schema, options.decode)
        cls = LsmkvPushdownReader if options.pushdown else LsmkvReader
        return cls(options, self.default_partitions)

    def writer(self, schema: Any, overwrite: bool):
        from .writer import LsmkvWriter
        return LsmkvWriter(WriteOptions.parse(self.options), schema, overwrite)
