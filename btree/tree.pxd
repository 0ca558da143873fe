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
