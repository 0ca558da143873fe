"""The data source's write side: ``df.write.format("lsmkv")``.

Planning (``writer()``, on the driver) checks the DataFrame's columns
(``key`` and ``value``, each binary or string; strings are stored as
UTF-8) and the target path, and creates the job's staging directory
``<stagingDir>/.<store name>.ingest-<id>`` (by default beside the store,
so files move into it by rename or hard link).

Each task (``write()``) receives its rows as Arrow batches and hands them
to a ``TaskOutput`` (task_output.py): rows in (key, value) order, as
``lsmkv.spark.write`` sorts them, stream straight into table files; rows
in any other order are buffered up to ``taskSortBufferBytes``, sorted under
the duplicate rule (runs.py: a key's greatest value wins), spilled and
merged. The task's files are of about ``targetFileBytes``, written with
``lsmkv.TableWriter``; the commit message names them with their key
ranges. A failing task removes what it wrote.

The driver's ``commit()`` merges overlapping files, checks the counts the
tasks report against ``expectedRows``/``expectedKeys`` when they are given
(rows the tasks received; distinct keys in the files, which is what the
store gains at most) and ingests the files (ingest.py); ``abort()`` leaves
the store untouched. Either removes the staging directory (staging.py); the
staging directory of a driver that died before either could run is removed
by the next write planned for the store.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from lsmkv.base.errors import InvalidDatabaseError, LsmkvError

from . import staging
from .ingest import StagedFile, disjoint, install
from .options import WriteOptions
from .store import detect
from .task_output import TaskOutput

COLUMN_TYPES = ("binary", "string")


@dataclass
class TaskFiles(WriterCommitMessage):
    """What one task wrote: its table files and how many rows it received."""

    files: list[StagedFile] = field(default_factory=list)
    rows: int = 0


def check_write_schema(schema: Any) -> None:
    """The DataFrame must have exactly the columns key and value, each
    binary or string; ValueError naming what is wrong."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    missing = [c for c in ("key", "value") if c not in types]
    if missing:
        raise ValueError(f"format lsmkv writes a DataFrame with columns key and value; it has no "
                         f"{' and no '.join(missing)} column (columns: {', '.join(types) or 'none'}); "
                         f"rename or select them, e.g. df.selectExpr('k AS key', 'v AS value')")
    extra = [c for c in types if c not in ("key", "value")]
    if extra:
        raise ValueError(f"format lsmkv writes only the columns key and value; the DataFrame also has "
                         f"{', '.join(extra)}: select key and value first")
    for name in ("key", "value"):
        if types[name] not in COLUMN_TYPES:
            raise ValueError(f"column {name} is {types[name]}; format lsmkv writes binary or string "
                             f"(strings as UTF-8): cast it, e.g. col('{name}').cast('string')")


class LsmkvWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, schema: Any, overwrite: bool) -> None:
        check_write_schema(schema)
        self.options = options
        self.overwrite = overwrite
        found = detect(options.path)  # InvalidDatabaseError for a path that is not a store
        if found is not None and options.engine is not None and found != options.engine and not overwrite:
            raise InvalidDatabaseError(f"{options.path} is a {found} store; appending needs engine={found} "
                                       f"(not {options.engine}), or mode overwrite to replace it")
        self.engine = options.engine or found or "lsm"
        staging.remove_stale(options.path, options.staging_dir)
        self.staging = staging.create(options.path, options.staging_dir)

    # -- a task -------------------------------------------------------------------------------

    def write(self, iterator: Iterator[Any]) -> TaskFiles:
        import pyarrow as pa
        if not os.path.isdir(self.staging):
            raise FileNotFoundError(f"the staging directory {self.staging} is gone (the write was aborted)")
        opts = self.options
        output = TaskOutput(self.staging, f"task-{uuid.uuid4().hex[:8]}", opts.sort_buffer_bytes,
                            opts.target_file_bytes)
        try:
            for batch in iterator:
                if batch.num_rows:
                    output.add_columns(*_column(batch, "key", pa), *_column(batch, "value", pa), batch.nbytes)
            return TaskFiles(_staged(output.finish()), output.rows)
        except BaseException:
            output.discard()
            raise

    # -- the driver ---------------------------------------------------------------------------

    def commit(self, messages: list[TaskFiles | None]) -> None:
        try:
            done = [m for m in messages if m is not None]
            files = disjoint([f for m in done for f in m.files], self.staging, self.options.target_file_bytes)
            check_counts(sum(m.rows for m in done), sum(f.entries for f in files), self.options)
            install(self.options.path, self.engine, [f.path for f in files], self.overwrite)
        finally:
            staging.remove(self.staging)

    def abort(self, messages: list[TaskFiles | None]) -> None:
        staging.remove(self.staging)


class WriteCountError(LsmkvError):
    """The tasks of a write received other counts of rows or keys than the
    write was told to expect; nothing was ingested."""


def check_counts(rows: int, keys: int, options: WriteOptions) -> None:
    """WriteCountError when ``rows`` (received by the tasks) or ``keys``
    (distinct keys in their files) differ from the expected counts given."""
    wrong = []
    if options.expected_rows is not None and rows != options.expected_rows:
        wrong.append(f"received {rows:,} rows where {options.expected_rows:,} were expected (option expectedRows)")
    if options.expected_keys is not None and keys != options.expected_keys:
        wrong.append(f"wrote {keys:,} distinct keys where {options.expected_keys:,} were expected "
                     f"(option expectedKeys)")
    if wrong:
        raise WriteCountError(f"the write into {options.path} is not committed: its tasks {' and '.join(wrong)}; "
                              f"the store is unchanged")


def _column(batch: Any, name: str, pa: Any) -> tuple[Any, Any]:
    """Column ``name`` of an Arrow batch as (offsets, data): its binary
    layout, viewed without a copy (TaskOutput.add_columns)."""
    import numpy as np
    column = batch.column(batch.schema.get_field_index(name))
    if column.null_count:
        raise ValueError(f"column {name} holds a null in {column.null_count} row(s); format lsmkv stores "
                         f"no nulls: filter them out or fill them (e.g. df.na.drop())")
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
    _, offsets, data = column.buffers()
    width = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(offsets, dtype=width)[column.offset:column.offset + len(column) + 1]
    return offsets, data if data is not None else b""


def _staged(infos: list[Any]) -> list[StagedFile]:
    return [StagedFile(i.path, i.smallest, i.largest, i.entries, i.size) for i in infos]
