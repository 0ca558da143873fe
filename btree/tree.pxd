# Cython declarations for btree/tree.py in the compiled build: the types its
# descents declare their locals with (btree/node.pxd, btree/bufferpool.pxd).
from btree.bufferpool cimport BufferPool
from btree.node cimport Node
