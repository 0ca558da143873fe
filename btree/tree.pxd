# Cython declarations for btree/tree.py in the compiled build: the types its
# descents declare their locals with (btree/node.pxd, btree/bufferpool.pxd).
from btree.bufferpool cimport BufferPool
from btree.node cimport Node
from btree.pager cimport Pager
from lsmkv.base.key_search cimport keys_bisect_left, keys_bisect_right


# The tree is an extension type: a descent reads its fields (the pool, the
# page dict, the root, the height) as C struct members, not instance-dict
# lookups. Every attribute it has is declared here; none can be added.
cdef class Tree:
    cdef public BufferPool pool
    cdef public object ttl_entries
    cdef public object now_ms
    cdef public object expiry
    cdef public dict ahi
    cdef public dict ahi_page
    cdef public Pager pager
    cdef public object pages
    cdef public object root
    cdef public Py_ssize_t height
    cdef public object inner
    cdef public object entries
    cdef public object version
    cdef public object page_size
    cdef public object max_cell
    cdef public object max_key
    cdef public object max_inline
    cdef public object shifts
    cdef public object min_fill
    cdef public object ovf_data
    cdef public dict snaps
    cdef public object snap_seq
    cdef public list deferred

    # A C call from DB.get (btree/db.pxd), a Python method to every other caller.
    cpdef get(self, bytes key)

    # C calls within the tree: a descent's load of a page into the pool, and
    # a range read's seek, start, leaves and chunk end (chunk_forward and
    # chunk_backward call them once or more per chunk).
    cpdef Node _load(self, object pgno, bint leaf)
    cpdef object _seek_leaf(self, object key, object view, bint reverse)
    cpdef tuple _chunk_start(self, object key, bint inclusive, object view, object overlay, object resume,
                             bint reverse)
    cpdef bint _chunk_ends_before(self, object pg, bint full, bint seek, object overlay)
    cpdef object _range_leaf(self, object pg, object overlay, bint first)
