# Cython declarations augmenting lsmkv/base/little_endian.py in the compiled
# build (the .py stays the source): put_le is a C function on a byte pointer,
# cimported by the compiled encoders (lsmkv/lsm/table/block.pxd,
# lsmkv/lsm/write_batch.pxd).

import cython

@cython.locals(j=int)
cdef void put_le(unsigned char* p, Py_ssize_t at, unsigned long long value, int width) noexcept
