# Cython declarations for lsmkv/lsm/db.py in the compiled build: the types
# DB.get and the put path declare their locals with (memtable.pxd,
# read_state.pxd, wal.pxd, lsmkv/base/write_queue.pxd, table/reader.pxd: a
# get calls TableReader.get, a put WriteQueue.try_lead, directly, not
# through an attribute lookup).

from lsmkv.lsm.memtable cimport MemTable
from lsmkv.lsm.read_state cimport ReadState
from lsmkv.lsm.table.reader cimport TableReader
from lsmkv.lsm.wal cimport LogWriter
from lsmkv.base.write_queue cimport WriteQueue
from lsmkv.base.key_search cimport keys_bisect_left
