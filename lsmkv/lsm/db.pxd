# Cython declarations for lsmkv/lsm/db.py in the compiled build: the types
# DB.get declares its locals with (memtable.pxd, read_state.pxd).

from lsmkv.lsm.memtable cimport MemTable
from lsmkv.lsm.read_state cimport ReadState
