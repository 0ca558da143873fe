# Cython declarations augmenting btree/node.py in the compiled build (the
# .py stays the source; this file only types what it already holds).
# Node becomes an extension type: its fields are C struct members, so the
# engine's descents read and write them without an attribute lookup.

cdef class Node:
    cdef public object pgno
    cdef public bint leaf
    cdef public object keys
    cdef public object vals
    cdef public object kids
    cdef public object prev
    cdef public object next
    cdef public object used
    cdef public bint dirty
    cdef public bint ref
    cdef public object saved
    cdef public bint ovf
    cdef public Py_ssize_t hits
