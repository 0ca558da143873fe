# Cython declarations for btree/tree.py in the compiled build: the types its
# descents declare their locals with (btree/node.pxd, btree/bufferpool.pxd).
from btree.bufferpool cimport BufferPool
from btree.node cimport Node
from lsmkv.base.key_search cimport keys_bisect_left, keys_bisect_right
