# Cython declarations augmenting btree/node.py in the compiled build (the
# .py stays the source; this file only types what it already holds).
# Node becomes an extension type: its fields are C struct members, so the
# engine's descents read and write them without an attribute lookup.

import cython
from lsmkv.base.checksum cimport crc32_past_stored

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

# A decoded leaf's cells (decode_node) and a range read's (LeafImage.cells),
# read in place: C integers, no struct call, keys compared byte by byte.
@cython.locals(size=Py_ssize_t, header=Py_ssize_t, slot=Py_ssize_t, inline=Py_ssize_t, off=Py_ssize_t, klen=Py_ssize_t,
               vlen=Py_ssize_t, ks=Py_ssize_t, ke=Py_ssize_t, ve=Py_ssize_t, used=Py_ssize_t,
               prev_ks=Py_ssize_t, prev_klen=Py_ssize_t, stop=Py_ssize_t, j=Py_ssize_t,
               base=Py_ssize_t, at=Py_ssize_t, end=Py_ssize_t, p="const unsigned char*")
cpdef Py_ssize_t _plain_cells_in_place(bytes buf, Py_ssize_t first, Py_ssize_t last, list keys,
                                       list vals) except -3

# A get's search of a leaf image outside the pool (_search_cells, its
# binary search _slot_at_or_above), read in place: C integers, keys
# compared byte by byte, the value cut from the image directly.
@cython.locals(lo=Py_ssize_t)
cpdef _search_cells(bytes buf, Py_ssize_t count, Py_ssize_t page_size, bytes key)
@cython.locals(p="const unsigned char*", k="const unsigned char*", size=Py_ssize_t, cell=Py_ssize_t,
               expiring=Py_ssize_t, at=Py_ssize_t, off=Py_ssize_t, klen=Py_ssize_t, kind=Py_ssize_t,
               vlen=Py_ssize_t, ks=Py_ssize_t, ke=Py_ssize_t, j=Py_ssize_t)
cpdef _cell_value_in_place(bytes buf, Py_ssize_t i, Py_ssize_t count, Py_ssize_t page_size, bytes key)
@cython.locals(size=Py_ssize_t, nkey=Py_ssize_t, slots=Py_ssize_t, slot=Py_ssize_t, cell=Py_ssize_t, deadline=Py_ssize_t,
               expiring=Py_ssize_t, lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, at=Py_ssize_t,
               off=Py_ssize_t, klen=Py_ssize_t, ks=Py_ssize_t, ke=Py_ssize_t, stop=Py_ssize_t, j=Py_ssize_t,
               p="const unsigned char*", k="const unsigned char*")
cpdef Py_ssize_t _slot_at_or_above(bytes buf, Py_ssize_t count, bytes key, bint above=*) except -2

# A get's check of a leaf image's header (leaf_value): its fields read in place.
@cython.locals(p="const unsigned char*", value="unsigned long")
cpdef unsigned long _u32_at(bytes buf, Py_ssize_t at)
@cython.locals(p="const unsigned char*", header=Py_ssize_t, leaf=Py_ssize_t, slot=Py_ssize_t, count=Py_ssize_t,
               i=Py_ssize_t, epoch="unsigned long long",
               number="unsigned long", stored="unsigned long", computed="unsigned long")
cpdef Py_ssize_t _checked_leaf_count(bytes buf, Py_ssize_t pgno, Py_ssize_t page_size,
                                     unsigned long long max_epoch) except -2

# A range read's check of a leaf image (leaf_image): the slot array and the
# links read in place.
@cython.locals(p="const unsigned char*", at=Py_ssize_t, end=Py_ssize_t)
cpdef bint _slots_clear_of_array(bytes buf, Py_ssize_t count)
@cython.locals(count=Py_ssize_t)
cpdef leaf_image(bytes buf, Py_ssize_t pgno, Py_ssize_t page_size, path, unsigned long long max_epoch)

# A leaf image a range read holds (LeafImage): an extension type, made
# once per leaf read outside the pool, its fields read by Tree.chunk_forward.
@cython.locals(count=Py_ssize_t)
cpdef leaf_value(bytes buf, Py_ssize_t pgno, Py_ssize_t page_size, bytes key, unsigned long long max_epoch)

cdef class LeafImage:
    cdef public object pgno
    cdef public bytes buf
    cdef public tuple slots
    cdef public Py_ssize_t count
    cdef public object prev
    cdef public object next
    cdef public object path
