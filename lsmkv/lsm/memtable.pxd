# Cython declarations augmenting lsmkv/lsm/memtable.py in the compiled build
# (the .py stays the source): the memtable's dict and index lists are typed,
# so a put and a get reach them without attribute lookups or method calls.

import cython

# A put's index insert (memtable.py): the binary searches compare the keys'
# bytes in C (lsmkv/base/key_search.py).
from lsmkv.base.key_search cimport keys_bisect_right, keys_insort

cdef class MemTable:
    cdef public dict _latest
    cdef public object _index
    cdef public list _nodes
    cdef public list _maxes
    cdef public Py_ssize_t size
    cdef public object log_number
    cdef public object meta
    cdef public object range_dels
    cdef public object _range_list
    cdef object __weakref__

    @cython.locals(latest=dict, maxes=list, node=list, i=Py_ssize_t, split_at=Py_ssize_t, overhead=Py_ssize_t)
    cpdef add(self, seq, kind, key, value)

# A flush's run of a skiplist node whose keys have one version each
# (sorted_runs' common case): one loop with the versions' fields as C integers.
@cython.locals(seq_kinds=list, values=list, i=Py_ssize_t, version=tuple, seq="unsigned long long",
               kind="unsigned long long")
cpdef tuple one_version_run(dict latest, list node)
