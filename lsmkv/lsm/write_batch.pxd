# Cython declarations augmenting lsmkv/lsm/write_batch.py in the compiled
# build (the .py stays the source): a put's log record is encoded by a C call
# from the DB's write path (lsmkv/lsm/db.py _write_one), not a Python call,
# straight into the buffer the log writer frames it in (encode_single_framed).

import cython

from lsmkv.base.little_endian cimport put_le

cpdef bytes encode_single(long long seq, int kind, bytes key, bytes value)

@cython.locals(klen=Py_ssize_t, vlen=Py_ssize_t, head=Py_ssize_t, out=bytearray, p="unsigned char*", at=Py_ssize_t,
               i=Py_ssize_t, src="const unsigned char*")
cpdef bytearray encode_single_framed(long long seq, int kind, bytes key, bytes value, Py_ssize_t room)
