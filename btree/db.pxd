# Cython declarations for btree/db.py in the compiled build: DB stays a
# Python class; its get calls the tree's get as a C method (btree/tree.pxd).
from btree.tree cimport Tree
