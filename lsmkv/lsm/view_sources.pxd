# Cython declarations augmenting lsmkv/lsm/view_sources.py in the compiled
# build (the .py stays the source): a view reads the read state's fields as
# C struct members, searches a level's largest keys with the C bisection,
# and makes its sources as the extension types lsmkv/lsm/cursor.pxd declares.

from lsmkv.base.key_search cimport keys_bisect_left
from lsmkv.lsm.cursor cimport LevelSource, MemTableSource, TableSource, seek_chunk
from lsmkv.lsm.read_state cimport ReadState
