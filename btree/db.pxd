# Cython declarations for btree/db.py in the compiled build: DB stays a
# Python class; its get calls PointGet.get as a C method (btree/point_get.pxd).
from btree.point_get cimport PointGet
