# Cython declarations augmenting lsmkv/lsm/cursor.py in the compiled build
# (the .py stays the source): the sources are extension types, so a
# view makes each with one allocation and reads their fields as C struct members.

import cython

from lsmkv.base.key_search cimport keys_bisect_left
from lsmkv.lsm.table.reader cimport TableReader
from lsmkv.lsm.skiplist cimport UnrolledSkipList

@cython.locals(most=Py_ssize_t, chunk=Py_ssize_t, least=Py_ssize_t)
cpdef Py_ssize_t seek_chunk(Py_ssize_t entries, Py_ssize_t densest) except -1

cdef class TableSource:
    cdef public TableReader reader
    cdef public object index_keys
    cdef public Py_ssize_t count
    cdef public object read_seq
    cdef public object now_ms
    cdef public object seek_chunk
    cdef public object merged
    cdef public object keep
    cdef public bint in_place
    cdef public Py_ssize_t memo_block
    cdef public object memo_chunk
    cdef public object ended
    cdef public Py_ssize_t going

cdef class LevelSource:
    cdef public object files
    cdef public object open_table
    cdef public object read_seq
    cdef public object now_ms
    cdef public object largest
    cdef public object lo
    cdef public object hi
    cdef public object seek_chunk
    cdef public object merged
    cdef public object keep
    cdef public Py_ssize_t count
    cdef public dict tables

cdef class MemTableSource:
    cdef public UnrolledSkipList index
    cdef public dict latest
    cdef public object read_seq
    cdef public object now_ms
    cdef public object merged
    cdef public object first_chunk
    cdef public object size
    cdef public object walked_to
    cdef public object walked_way
