# Cython declarations augmenting lsmkv/lsm/table/block.py in the compiled
# build (the .py stays the source): a raw block's search computes its
# offsets as C integers.

import cython

from lsmkv.base.little_endian cimport put_le

# The unpacks of a lookup (block.py): C reads of a bytes block in place.
cpdef (unsigned long long,) _unpack_count(data, Py_ssize_t at) except *
cpdef (unsigned long long, unsigned long long) _unpack_pair(data, Py_ssize_t at) except *
cpdef (unsigned long long,) _unpack_entry(data, Py_ssize_t at) except *
@cython.locals(p="const unsigned char*", v="unsigned long long")
cdef unsigned long long _le32(bytes data, Py_ssize_t at)
@cython.locals(at=Py_ssize_t, stop=Py_ssize_t, last="unsigned long long", end="unsigned long long")
cpdef bint _ends_ascending_in_place(bytes data, Py_ssize_t base, Py_ssize_t n) except -1

@cython.locals(tail=Py_ssize_t, n=Py_ssize_t, base=Py_ssize_t, klen=Py_ssize_t, p=Py_ssize_t, j=Py_ssize_t,
               at=Py_ssize_t, start=Py_ssize_t, end=Py_ssize_t, lo=Py_ssize_t, sk_at=Py_ssize_t,
               sk="unsigned long long")
cpdef search_block(data, key, read_seq)

# The binary search of a raw block's keys (search_block's slow path and
# entries_after's): a C call with C integers.
@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t _first_at_or_above(data, key_ends, Py_ssize_t n, key, bint inclusive) except -1

# A short range read's slice of a raw block: the binary search at the keys'
# stride and the offsets as C integers.
@cython.locals(size=Py_ssize_t, n=Py_ssize_t, base=Py_ssize_t, sk_at=Py_ssize_t, key_width=Py_ssize_t,
               value_width=Py_ssize_t, lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, at=Py_ssize_t, end=Py_ssize_t,
               p="const unsigned char*")
cpdef entries_after(data, key, bint inclusive, limit, widths=*)

# A run of fixed-width fields (keys or values of one size): a C loop of
# slices of the block in place.
@cython.locals(p="const unsigned char*", out=list, part=Py_ssize_t)
cpdef list _fixed_run(data, Py_ssize_t at, Py_ssize_t width, Py_ssize_t count)

# A block's columns as its builder encodes them (encode_block, on a flush's
# and a compaction's path): one C loop of little-endian writes.
@cython.locals(n=Py_ssize_t, i=Py_ssize_t, out=bytearray, p="unsigned char*",
               key_end="unsigned long long", value_end="unsigned long long")
cpdef bytearray _columns_in_place(list keys, list seq_kinds, list values)

# A block's fixed widths (fixed_widths, on a range read's first touch of a
# block): its offsets read in place in one C loop.
@cython.locals(i=Py_ssize_t, key_width="unsigned long long", value_start="unsigned long long",
               first_value_end="unsigned long long", value_width="unsigned long long")
cpdef _widths_in_place(bytes data, Py_ssize_t base, Py_ssize_t n)
