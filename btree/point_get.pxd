# Cython declarations for btree/point_get.py in the compiled build: the
# state a get reads as C struct members, the tree's get a C call.
import cython

from btree.bufferpool cimport BufferPool
from btree.pager cimport Pager
from btree.tree cimport Tree


cdef class PointGet:
    cdef public object acquire
    cdef public object release
    cdef public bint read_only
    cdef public bint usable
    cdef public Tree tree
    cdef public BufferPool pool
    cdef public Pager pager
    cdef public object pages
    cdef public dict ahi
    cdef public dict ahi_page
    cdef public Py_ssize_t gets
    cdef public Py_ssize_t ahi_hits
    cdef public Py_ssize_t page_reads

    # A C call from DB.get (btree/db.pxd), a Python method to every other caller.
    @cython.locals(pager=Pager, pool=BufferPool, reads=Py_ssize_t, hits=Py_ssize_t)
    cpdef get(self, bytes key)
