# Cython declarations augmenting lsmkv/base/mapping.py in the compiled build
# (the .py stays the source): the mapping protocol is an extension type, so
# the lsm DB, which derives from it, can be one (lsmkv/lsm/db.pxd). The
# btree DB, a Python class, derives from it as from any base.

cdef class KeyValueMapping:
    pass
