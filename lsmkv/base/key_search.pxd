# Cython declarations augmenting lsmkv/base/key_search.py in the compiled
# build (the .py stays the source): the searches are C functions that other
# compiled modules cimport, their comparisons a loop over the keys' bytes.

import cython
from libc.string cimport memcmp

@cython.locals(n=Py_ssize_t, m=Py_ssize_t, j=Py_ssize_t, stop=Py_ssize_t, c=int,
               ap="const unsigned char*", bp="const unsigned char*")
cdef inline bint _below(bytes a, bytes b) except -1

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t keys_bisect_right(list keys, bytes key) except -1

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t keys_bisect_left(list keys, bytes key) except -1

cpdef keys_insort(list keys, bytes key)

@cython.locals(flags=list, previous=bytes, key=bytes)
cpdef new_key_flags(list keys, bytes last)
