# Cython declarations augmenting lsmkv/lsm/table/block.py in the compiled
# build (the .py stays the source): a raw block's search computes its
# offsets as C integers.

import cython

@cython.locals(tail=Py_ssize_t, n=Py_ssize_t, base=Py_ssize_t, klen=Py_ssize_t, p=Py_ssize_t, j=Py_ssize_t,
               at=Py_ssize_t, start=Py_ssize_t, end=Py_ssize_t, lo=Py_ssize_t, sk_at=Py_ssize_t)
cpdef search_block(data, key, read_seq)
