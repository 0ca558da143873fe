# Cython declarations augmenting btree/pager.py in the compiled build (the
# .py stays the source): the pager is an extension type, so a get that
# searches a leaf outside the pool (Pager.search_leaf, a C call from
# Tree.get) reads the page size, the slots, the overlay and the file as
# struct members and counts its read in C integers. Every attribute it has
# is declared here; none can be added.
from btree.node cimport leaf_image, leaf_value

cdef class Pager:
    cdef public object fs
    cdef public object dir
    cdef public object path
    cdef public object journal_path
    cdef public object read_only
    cdef public object file
    cdef public object page_size
    cdef public object meta
    cdef public dict overlay
    cdef public object free
    cdef public object _free_heap
    cdef public object free_changed
    cdef public object freelist_pages
    cdef public object page_count
    cdef public object map
    cdef public object readers
    cdef public object slots
    cdef public object _failed_epoch
    cdef public Py_ssize_t page_reads
    cdef public Py_ssize_t bytes_read
    cdef public object bytes_written
    cdef public object data_bytes

    cpdef tuple search_leaf(self, object pgno, bytes key)
    cpdef read_leaf(self, object pgno)
