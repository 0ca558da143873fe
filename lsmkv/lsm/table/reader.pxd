# Cython declarations augmenting lsmkv/lsm/table/reader.py in the compiled
# build (the .py stays the source). The readers' per-block columns are typed
# (list, bytearray, dict), so a lookup indexes them without a method call,
# and IOStats' counters are C integers.

import cython

from lsmkv.lsm.table.block cimport entries_after, search_block
from lsmkv.lsm.table.bloom cimport bloom_hash
from lsmkv.base.key_search cimport keys_bisect_left

cdef unsigned long long _LOW32


cdef class IOStats:
    cdef public Py_ssize_t block_reads
    cdef public Py_ssize_t bytes_read
    cdef public Py_ssize_t searches
    cdef public Py_ssize_t get_block_reads
    cdef public Py_ssize_t next_promotion


cdef class TableReader:
    cdef public object path
    cdef public object number
    cdef public object file
    cdef public object file_size
    cdef public object format_version
    cdef public object codec
    cdef public object filter
    cdef public object properties
    cdef public object index_keys
    cdef public object index_seq_kinds
    cdef public object index_offsets
    cdef public object index_sizes
    cdef public list blocks
    cdef public bytearray refs
    cdef public bytearray uses
    cdef public list charges
    cdef public object block_widths
    cdef public bytearray indexed
    cdef public dict key_slots
    cdef public object global_seq
    cdef public object admit_on_read
    cdef public object range_dels
    cdef public object _cache
    cdef public IOStats _io
    cdef public object _bloom_bits
    cdef public unsigned long long _bloom_m
    cdef public object _bloom_probes
    cdef public const unsigned char[:] _bloom_view
    cdef public Py_ssize_t _bloom_k
    cdef public long long in_place_from
    cdef object __weakref__

    # get's offsets and counters as C integers; its bloom probes (the
    # compiled branch) in C integers over the filter's bytes.
    @cython.locals(b=Py_ssize_t, j=Py_ssize_t, i=Py_ssize_t, n=Py_ssize_t, m=Py_ssize_t, uses=Py_ssize_t,
                   blocks=list, io=IOStats, hc="unsigned long long",
                   bit_count="unsigned long long", at="unsigned long long", step="unsigned long long",
                   bit="unsigned long long", probe=Py_ssize_t, view="const unsigned char[:]")
    cpdef get(self, key, h, read_seq)

    # A short range read's part of a block, read in place (a cursor's table
    # source calls it directly): its block's bookkeeping as C integers.
    cpdef entries_after(self, Py_ssize_t i, key, bint inclusive, limit)
