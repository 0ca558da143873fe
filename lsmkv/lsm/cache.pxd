# Cython declarations augmenting lsmkv/lsm/cache.py in the compiled build
# (the .py stays the source): the cache is an extension type with C integer
# counters, and it reaches a reader's per-block columns (blocks, refs,
# charges: typed in table/reader.pxd) as struct members, so admitting a
# block and the CLOCK sweep that makes room for it make no attribute lookup.

import cython

from lsmkv.lsm.table.reader cimport TableReader

cdef class BlockCache:
    cdef public Py_ssize_t capacity
    cdef public Py_ssize_t usage
    cdef public Py_ssize_t admitted
    cdef public Py_ssize_t evicted
    cdef public Py_ssize_t promoted
    cdef public object _owners
    cdef public object _indexes
    cdef public object _lock
    cdef object _acquire
    cdef object _release

    cpdef admit(self, TableReader reader, Py_ssize_t index, held, Py_ssize_t charge)

    @cython.locals(extra=Py_ssize_t)
    cpdef promote(self, TableReader reader, Py_ssize_t index, held, block)

    @cython.locals(owner=TableReader, i=Py_ssize_t)
    cpdef _make_room(self, Py_ssize_t charge)

    @cython.locals(i=Py_ssize_t)
    cpdef drop_reader(self, TableReader reader)
