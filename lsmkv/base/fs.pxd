# Cython declarations augmenting lsmkv/base/fs.py in the compiled build (the
# .py stays the source): the append-only files are extension types, so an
# append (a put's log record) reads and moves the file's size and the
# mapping's capacity as C struct members, not slot lookups. Python classes
# may still subclass them (the fault-injecting file system's files do).

import cython

cdef class WritableFile:
    cdef public object path
    cdef public object _fd
    cdef public Py_ssize_t size

    cpdef append(self, data, commit_at=*)

cdef class MappedAppendFile(WritableFile):
    cdef public object _map
    cdef public Py_ssize_t _capacity
    cdef public object _remap
    cdef unsigned char[::1] _view

    @cython.locals(start=Py_ssize_t, end=Py_ssize_t, commit=Py_ssize_t, i=Py_ssize_t,
                   src=p_const_uchar, dst=p_uchar)
    cpdef append(self, data, commit_at=*)
