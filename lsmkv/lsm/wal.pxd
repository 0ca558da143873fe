# Cython declarations augmenting lsmkv/lsm/wal.py in the compiled build (the
# .py stays the source): the log writer is an extension type, and appending
# one record is a C call from a caller that has it typed.

import cython

from lsmkv.base.fs cimport WritableFile
from lsmkv.base.little_endian cimport put_le

cdef class LogWriter:
    cdef public WritableFile file
    cdef public Py_ssize_t _block_offset

    @cython.locals(n=Py_ssize_t, end=Py_ssize_t, header=Py_ssize_t, last_header_start=Py_ssize_t)
    cpdef add_record(self, payload)

    @cython.locals(n=Py_ssize_t, end=Py_ssize_t, header=Py_ssize_t, last_header_start=Py_ssize_t,
                   crc="unsigned long long", p="unsigned char*")
    cpdef add_framed(self, bytearray record)
