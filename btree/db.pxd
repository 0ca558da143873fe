# Cython declarations for btree/db.py in the compiled build: the DB is an
# extension type, so a get reads the PointGet it calls (btree/point_get.pxd)
# as a C struct member, not an instance-dict entry found after a type
# lookup; every other field lives in its __dict__, as in the lsm DB
# (lsmkv/lsm/db.pxd). KeyValueMapping, its base, is an extension type too
# (lsmkv/base/mapping.pxd).
from lsmkv.base.mapping cimport KeyValueMapping
from btree.point_get cimport PointGet


cdef class DB(KeyValueMapping):
    cdef dict __dict__
    cdef public PointGet _point
