# Cython declarations augmenting lsmkv/base/write_queue.py in the compiled
# build (the .py stays the source): the write queue is an extension type, so
# the uncontended put's try_lead() and release() are C calls from a caller
# that has it typed (lsmkv/lsm/db.py's _write_one), with no attribute lookup.

cdef class WriteQueue:
    cdef object _commit_group
    cdef object _lock
    cdef object _try_acquire
    cdef object _release
    cdef object _queue
    cdef public Py_ssize_t groups
    cdef public Py_ssize_t grouped_writes
    cdef public Py_ssize_t largest_group

    cpdef bint try_lead(self)
    cpdef release(self)
