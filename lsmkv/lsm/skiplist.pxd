# Cython declarations augmenting lsmkv/lsm/skiplist.py in the compiled build
# (the .py stays the source): the skiplist is an extension type whose lane
# and nodes are typed lists, so a cursor's "keys after k" reads them as
# struct members and searches them with the C bisections of key_search.

import cython

from lsmkv.base.key_search cimport keys_bisect_left, keys_bisect_right

cdef class UnrolledSkipList:
    cdef public list _nodes
    cdef public list _maxes
    cdef public object _lock

    @cython.locals(maxes=list, node=list, i=Py_ssize_t, j=Py_ssize_t)
    cpdef list keys_after(self, key, bint inclusive, limit=*)

    @cython.locals(maxes=list, node=list, i=Py_ssize_t, j=Py_ssize_t)
    cpdef list keys_before(self, key, bint inclusive, limit=*)
