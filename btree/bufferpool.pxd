# Cython declarations augmenting btree/bufferpool.py in the compiled build
# (the .py stays the source): the pool is an extension type, so a descent
# counts its lookups and reads its limits as C struct members, and a get
# outside the pool asks admit and counts observe_image as C calls.

cdef class BufferPool:
    cdef public object pager
    cdef public object cache_size
    cdef public object page_bytes
    cdef public object inner_bytes
    cdef public Py_ssize_t inner_pages
    cdef public Py_ssize_t hash_index_limit
    cdef public object hash_index_peak
    cdef public object pages
    cdef public object dirty
    cdef public object raw_dirty
    cdef public object ahi
    cdef public object ahi_page
    cdef public object misses
    cdef public Py_ssize_t lookups
    cdef public object evictions
    cdef public dict seen
    cdef public Py_ssize_t admit_after
    cdef public Py_ssize_t images_searched
    cdef public object _evicted_leaves
    cdef public object _evicted_hits
    cdef public Py_ssize_t capacity
    cdef public object dirty_limit

    # C calls from Tree.get (btree/tree.pxd), Python methods to every other caller.
    cpdef bint admit(self, object pgno, bint remember=*)
    cpdef observe_image(self, bytes buf)
