"""A write task's rows into table files (lsmkv/spark/task_output.py),
without Spark: rows sorted by (key, value) stream into files with no
buffer and no spill; rows in any other order, from the first batch out of
order on, are buffered, spilled and merged. Either way the files hold each
key once with its greatest value, disjoint and in key order."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lsmkv
from lsmkv.spark import task_output
from lsmkv.spark.task_output import TaskOutput


def _files_in(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".sst"))


def _batches(rows, size):
    for i in range(0, len(rows), size):
        chunk = rows[i:i + size]
        yield [k for k, _ in chunk], [v for _, v in chunk]


def _hand(output, keys, values, nbytes, form):
    """One batch to ``output``, as lists or as two binary columns (offsets
    that do not start at 0, over data with a byte in front)."""
    if form == "lists":
        output.add(keys, values, nbytes)
    else:
        output.add_columns(np.cumsum([1, *map(len, keys)]), b"x" + b"".join(keys),
                           np.cumsum([1, *map(len, values)]), b"y" + b"".join(values), nbytes)


def _contents(infos) -> list[tuple[bytes, bytes]]:
    out = []
    for info in infos:
        out.extend(lsmkv.read_table(info.path))
    return out


def _expected(rows) -> list[tuple[bytes, bytes]]:
    best: dict[bytes, bytes] = {}
    for k, v in rows:
        if k not in best or v > best[k]:
            best[k] = v
    return sorted(best.items())


def _check_disjoint(infos) -> None:
    for a, b in zip(infos, infos[1:]):
        assert a.largest < b.smallest


@pytest.mark.parametrize("form", ["lists", "columns"])
def test_sorted_rows_stream_into_files_without_spilling(tmp_path, form):
    # Keys repeat within a batch and across batch boundaries, with values
    # ascending, as a sort by (key, value) delivers them. A sort buffer of
    # one byte would spill at every batch if the rows were buffered.
    rng = random.Random(3)
    rows = sorted((b"k%06d" % rng.randrange(3000), bytes([rng.randrange(256)]) * rng.randrange(1, 40))
                  for _ in range(8000))
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=1, target_file_bytes=16384)
    for keys, values in _batches(rows, 97):
        _hand(output, keys, values, 1000, form)
        assert not [n for n in _files_in(tmp_path) if "-spill" in n]
    infos = output.finish()
    assert output.rows == len(rows)
    assert len(infos) > 1  # rolled at the target size
    _check_disjoint(infos)
    assert _contents(infos) == _expected(rows)
    assert sorted(_files_in(tmp_path)) == sorted(os.path.basename(i.path) for i in infos)


def test_strictly_ascending_column_batches_stream_without_a_python_object_per_row(tmp_path, monkeypatch):
    def no_lists(*args):
        raise AssertionError("a batch of strictly ascending keys was made into lists")

    monkeypatch.setattr(task_output, "_lists", no_lists)
    rows = [(b"k%06d" % i, b"v%d" % (i % 7) * (i % 50)) for i in range(0, 30000, 3)]
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=1, target_file_bytes=32768)
    for keys, values in _batches(rows, 500):
        _hand(output, keys, values, 1000, "columns")
    infos = output.finish()
    assert output.rows == len(rows) and len(infos) > 1
    _check_disjoint(infos)
    assert _contents(infos) == rows


def test_an_out_of_order_batch_ends_the_stream_and_the_runs_merge(tmp_path):
    rows = [(b"k%04d" % i, b"first") for i in range(0, 2000, 2)]
    later = [(b"k%04d" % i, b"second") for i in range(1999, -1, -3)]  # descending, overlapping the stream
    tail = [(b"k%04d" % i, b"third") for i in range(2000, 2100)]  # ascending again: still buffered
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=2000, target_file_bytes=8192)
    for batch in (rows, later, tail):
        for keys, values in _batches(batch, 50):
            output.add(keys, values, nbytes=len(keys) * 12)
    infos = output.finish()
    assert output.rows == len(rows) + len(later) + len(tail)
    _check_disjoint(infos)
    assert _contents(infos) == _expected(rows + later + tail)
    assert sorted(_files_in(tmp_path)) == sorted(os.path.basename(i.path) for i in infos)  # spills removed


def test_equal_keys_whose_values_descend_are_not_streamed_as_they_come(tmp_path):
    # Sorted by key only: the stream must not keep the last of equal keys.
    rows = [(b"a", b"2"), (b"a", b"9"), (b"b", b"7"), (b"b", b"1"), (b"c", b"5")]
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=1 << 20, target_file_bytes=1 << 20)
    for keys, values in _batches(rows, 2):
        output.add(keys, values, nbytes=20)
    assert _contents(output.finish()) == [(b"a", b"9"), (b"b", b"7"), (b"c", b"5")]


def test_discard_removes_streamed_and_spilled_files(tmp_path):
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=100, target_file_bytes=4096)
    for keys, values in _batches([(b"%05d" % i, b"v" * 30) for i in range(3000)], 100):
        output.add(keys, values, nbytes=3000)
    for keys, values in _batches([(b"%05d" % i, b"w") for i in range(3000, 0, -7)], 50):
        output.add(keys, values, nbytes=300)
    assert _files_in(tmp_path)
    output.discard()
    assert _files_in(tmp_path) == []
    assert os.listdir(tmp_path) == []


def test_no_rows_make_no_files(tmp_path):
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=100, target_file_bytes=4096)
    output.add([], [], nbytes=0)
    assert output.finish() == []
    assert os.listdir(tmp_path) == []


_rows = st.lists(st.tuples(st.binary(min_size=0, max_size=4), st.binary(min_size=0, max_size=6)), max_size=300)


@settings(max_examples=60, deadline=None)
@given(rows=_rows, order=st.sampled_from(["sorted", "shuffled", "sorted-then-shuffled", "by-key-only"]),
       batch=st.integers(1, 40), buffer=st.sampled_from([1, 64, 1 << 20]), seed=st.integers(0, 1000),
       form=st.sampled_from(["lists", "columns", "mixed"]))
def test_any_rows_in_any_order_give_each_key_once_with_its_greatest_value(tmp_path_factory, rows, order, batch,
                                                                          buffer, seed, form):
    rng = random.Random(seed)
    if order == "sorted":
        rows.sort()
    elif order == "shuffled":
        rng.shuffle(rows)
    elif order == "sorted-then-shuffled":
        rows.sort()
        cut = rng.randrange(len(rows) + 1)
        tail = rows[cut:]
        rng.shuffle(tail)
        rows = rows[:cut] + tail
    else:
        rng.shuffle(rows)
        rows.sort(key=lambda kv: kv[0])
    directory = tmp_path_factory.mktemp("task")
    output = TaskOutput(str(directory), "task", sort_buffer_bytes=buffer, target_file_bytes=4096)
    for keys, values in _batches(rows, batch):
        _hand(output, keys, values, sum(map(len, keys)) + sum(map(len, values)),
              rng.choice(["lists", "columns"]) if form == "mixed" else form)
    infos = output.finish()
    assert output.rows == len(rows)
    _check_disjoint(infos)
    assert _contents(infos) == _expected(rows)
    assert sum(i.entries for i in infos) == len(_expected(rows))
    assert sorted(_files_in(directory)) == sorted(os.path.basename(i.path) for i in infos)


@pytest.mark.parametrize("kind", ["binary", "large_binary", "string", "large_string"])
def test_a_tasks_arrow_columns_go_in_as_their_buffers_even_when_sliced(tmp_path, kind):
    # writer._column views an Arrow column's offsets and data without a
    # copy; a slice of an array (a batch cut from a bigger one) starts at an
    # offset into both, and string columns are cast to binary first.
    import pyarrow as pa  # (the spark extra installs it)

    from lsmkv.spark.writer import _column

    rows = [(b"k%05d" % i, b"v" * (i % 13)) for i in range(3000)]
    decode = kind.endswith("string")
    typ = getattr(pa, kind)()
    keys = pa.array([k.decode() if decode else k for k, _ in rows], typ)
    values = pa.array([v.decode() if decode else v for _, v in rows], typ)
    output = TaskOutput(str(tmp_path), "task", sort_buffer_bytes=1, target_file_bytes=1 << 20)
    for start in range(0, len(rows), 700):
        batch = pa.record_batch([keys.slice(start, 700), values.slice(start, 700)], names=["key", "value"])
        assert batch.column(0).offset == start
        output.add_columns(*_column(batch, "key", pa), *_column(batch, "value", pa), batch.nbytes)
    assert _contents(output.finish()) == rows

