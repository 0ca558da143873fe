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

A batch the task hands over as two binary columns (:meth:`TaskOutput.
add_columns`: offsets and data, Arrow's layout) is streamed as columns
(``TableWriter.put_columns``), without a Python object per row, when its
keys are strictly ascending after the held row; any other batch is made
into lists and taken as above.

This module never imports pyspark; the task hands it Python lists or
numpy offsets with their data.
"""

from __future__ import annotations

from itertools import compress
from operator import not_

import numpy as np

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

    def add_columns(self, key_offsets: np.ndarray, key_data, value_offsets: np.ndarray, value_data,
                    nbytes: int) -> None:
        """Take one batch given as two binary columns: key i is
        ``key_data[key_offsets[i]:key_offsets[i + 1]]``, value i likewise
        (``TableWriter.put_columns``' layout). Streamed as columns when its
        keys go on strictly ascending from the held row; otherwise as lists
        through :meth:`add` (module docstring)."""
        n = len(key_offsets) - 1
        if n <= 0:
            return
        key_data = memoryview(key_data).cast("B")
        value_data = memoryview(value_data).cast("B")
        if self._streaming:
            held = self._held
            if held is None:
                ko, kd, vo, vd = key_offsets, key_data, value_offsets, value_data
            else:  # the held row in front
                ko, kd = _prepend(held[0], key_offsets, key_data)
                vo, vd = _prepend(held[1], value_offsets, value_data)
            last = bytes(kd[ko[-2]:ko[-1]])
            try:
                if len(ko) > 2:  # rows before the last, which is held back but must be above them too
                    if bytes(kd[ko[-3]:ko[-2]]) >= last:
                        raise ValueError("the last key is not above the one before it")
                    self._stream_writer().put_columns(ko[:-1], kd, vo[:-1], vd)
            except ValueError:
                pass  # repeated or unordered keys (nothing was added): taken as lists below
            else:
                self._held = (last, bytes(vd[vo[-2]:vo[-1]]))
                self.rows += n
                self._rotate()
                return
        self.add(_lists(key_offsets, key_data), _lists(value_offsets, value_data), nbytes)

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
        self._stream_writer().put_sorted(keys, values)
        self._rotate()

    def _stream_writer(self) -> lsmkv.TableWriter:
        """The stream's file being written (started if there is none)."""
        if self._writer is None:
            self._writer = lsmkv.TableWriter(runs.table_name(self.directory, self.tag))
        return self._writer

    def _rotate(self) -> None:
        """Finish the stream's file once it reaches the target size."""
        if self._writer is not None and self._writer.file_size >= self.target_file_bytes:
            self._streamed.append(self._writer.finish())
            self._writer = None

    def _close_stream(self) -> None:
        if self._held is not None:
            self._write([self._held[0]], [self._held[1]])
            self._held = None
        if self._writer is not None:
            if self._writer.entries:
                self._streamed.append(self._writer.finish())
            else:
                self._writer.abort()  # (started for columns that were then taken as lists)
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


def _prepend(item: bytes, offsets: np.ndarray, data: memoryview) -> tuple[np.ndarray, bytes]:
    """A column with ``item`` in front of the rows ``offsets`` gives of ``data``."""
    start = int(offsets[0])
    shifted = np.empty(len(offsets) + 1, dtype=np.int64)
    shifted[0] = 0
    shifted[1:] = offsets
    shifted[1:] += len(item) - start
    return shifted, b"".join((item, data[start:int(offsets[-1])]))


def _lists(offsets: np.ndarray, data: memoryview) -> list[bytes]:
    """The rows of a column as a list of bytes."""
    start, end = int(offsets[0]), int(offsets[-1])
    whole = bytes(data[start:end])
    bounds = (np.asarray(offsets, dtype=np.int64) - start).tolist()
    return [whole[a:b] for a, b in zip(bounds, bounds[1:])]
