# Cython declarations augmenting lsmkv/base/mapping.py in the compiled build
# (the .py stays the source): the mapping protocol is an extension type, so
# the lsm and btree DBs, which derive from it, can be extension types too
# (lsmkv/lsm/db.pxd, btree/db.pxd).

cdef class KeyValueMapping:
    pass
