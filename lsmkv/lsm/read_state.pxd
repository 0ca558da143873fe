# Cython declarations augmenting lsmkv/lsm/read_state.py in the compiled
# build (the .py stays the source): a get reads a ReadState's fields as C
# struct members.

from lsmkv.lsm.memtable cimport MemTable

cdef class ReadState:
    cdef public MemTable mem
    cdef public object imms
    cdef public object memtables
    cdef public object version
    cdef public object floor
    cdef public object meta
    cdef public object range_dels
