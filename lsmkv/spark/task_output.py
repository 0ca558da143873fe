"""The table files one write task makes from the rows it receives.

A write range-partitioned and sorted by key (``lsmkv.spark.write``)
hands each task its rows in (key, value) order. Those rows are
**streamed**: each batch goes straight into a ``lsmkv.TableWriter``, with
no buffer, no sort and no merge, a new file started whenever one reaches
the target size. Equal keys arriving together keep only their last row,
which in (key, value) order is the greatest value: the duplicate rule of
runs.py. The last row of each batch is held back until the next batch
shows whether its key goes on there.

The first batch that breaks that order (rows written with
``df.write.format("lsmkv")`` and no sort, or a sort by something else)
ends the stream: what was streamed becomes one sorted run, and every row
from that batch on is **buffered** up to the sort buffer's size, sorted
under the duplicate rule and spilled as another run (runs.resolve). At the
end the runs are merged (runs.merge) into the task's files. Either way the
files hold each key once, with the value the rule picks from all the rows
the task received.

This module never imports pyspark; the task hands it Python lists.
"""

from __future__ import annotations

from itertools import compress
from operator import not_

import lsmkv

from . import runs


class TaskOutput:
    """Rows in, table files out (module docstring): :meth:`add` each
    batch, then :meth:`finish` for the files in key order, or
    :meth:`discard` to remove everything written."""

    def __init__(self, directory: str, tag: str, sort_buffer_bytes: int, target_file_bytes: int) -> None:
        self.directory = directory
        self.tag = tag
        self.sort_buffer_bytes = sort_buffer_bytes
        self.target_file_bytes = target_file_bytes
        #: Rows received, duplicates included.
        self.rows = 0
        self._streaming = True
        #: The stream's last row, not yet written: the next batch may repeat its key.
        self._held: tuple[bytes, bytes] | None = None
        self._writer: lsmkv.TableWriter | None = None
        #: The stream's finished files.
        self._streamed: list[lsmkv.TableInfo] = []
        #: The sorted runs to merge at the end, each a list of files: the
        #: stream's (once it ended), then each spill's.
        self._spilled: list[list[lsmkv.TableInfo]] = []
        self._keys: list[bytes] = []
        self._values: list[bytes] = []
        self._buffered = 0

    def add(self, keys: list[bytes], values: list[bytes], nbytes: int) -> None:
        """Take one batch of rows (``nbytes``: its size, counted against the
        sort buffer once rows are buffered)."""
        if not keys:
            return
        self.rows += len(keys)
        if self._streaming:
            if self._stream(keys, values):
                return
            self._end_stream()
        self._keys.extend(keys)
        self._values.extend(values)
        self._buffered += nbytes
        if self._buffered >= self.sort_buffer_bytes:
            self._spill()

    def finish(self) -> list[lsmkv.TableInfo]:
        """The task's files, disjoint and in key order (none for no rows)."""
        if self._streaming:
            self._close_stream()
            return self._streamed
        if not self._spilled:
            keys, values = runs.resolve(self._keys, self._values)
            self._keys = self._values = []
            return runs.write_sorted_lists(keys, values, self.directory, self.tag, self.target_file_bytes)
        if self._keys:
            self._spill()
        inputs = [info.path for run in self._spilled for info in run]
        merged = runs.write_tables(runs.merge(runs.read(inputs)), self.directory, self.tag,
                                   self.target_file_bytes)
        runs.remove(inputs)
        self._spilled = []
        return merged

    def discard(self) -> None:
        """Remove every file written (the task failed)."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        runs.remove(info.path for info in self._streamed)
        runs.remove(info.path for run in self._spilled for info in run)
        self._streamed, self._spilled = [], []

    # -- the stream -----------------------------------------------------------------------

    def _stream(self, keys: list[bytes], values: list[bytes]) -> bool:
        """Write the batch into the stream if, after the held row, it is in
        (key, value) order, keeping the last of equal keys; False, having
        written nothing, if it is not."""
        if self._held is not None:
            keys = [self._held[0], *keys]
            values = [self._held[1], *values]
        before, after = keys[:-1], keys[1:]
        if any(map(bytes.__ge__, before, after)):  # not strictly ascending: repeated keys, or out of order
            if any(map(bytes.__gt__, before, after)):
                return False
            keep = list(map(bytes.__ne__, before, after))  # row i stays unless row i + 1 has its key
            for i in compress(range(len(keep)), map(not_, keep)):
                if values[i] > values[i + 1]:
                    return False  # equal keys, values not ascending: not sorted by (key, value)
            keep.append(True)
            keys = list(compress(keys, keep))
            values = list(compress(values, keep))
        self._held = (keys[-1], values[-1])
        if len(keys) > 1:
            self._write(keys[:-1], values[:-1])
        return True

    def _write(self, keys: list[bytes], values: list[bytes]) -> None:
        if self._writer is None:
            self._writer = lsmkv.TableWriter(runs.table_name(self.directory, self.tag))
        self._writer.put_sorted(keys, values)
        if self._writer.file_size >= self.target_file_bytes:
            self._streamed.append(self._writer.finish())
            self._writer = None

    def _close_stream(self) -> None:
        if self._held is not None:
            self._write([self._held[0]], [self._held[1]])
            self._held = None
        if self._writer is not None:
            self._streamed.append(self._writer.finish())
            self._writer = None

    def _end_stream(self) -> None:
        """Rows out of order arrived: what was streamed becomes the first run to merge."""
        self._close_stream()
        self._streaming = False
        if self._streamed:
            self._spilled.append(self._streamed)
            self._streamed = []

    # -- the buffer -----------------------------------------------------------------------

    def _spill(self) -> None:
        keys, values = runs.resolve(self._keys, self._values)
        self._keys, self._values, self._buffered = [], [], 0
        self._spilled.append(runs.write_sorted_lists(keys, values, self.directory, self.tag + "-spill",
                                                     self.target_file_bytes))
