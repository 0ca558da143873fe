# Cython declarations for lsmkv/lsm/db.py in the compiled build: the DB is an
# extension type whose fields on the put and get paths are C struct members
# (a put reads and writes about twenty of them: as instance-dict entries
# they were a quarter of its cost); the rest live in its __dict__. Its
# helpers on those paths are C methods. The types its locals are declared
# with come from memtable.pxd, read_state.pxd, wal.pxd,
# lsmkv/base/write_queue.pxd and table/reader.pxd: a get calls
# TableReader.get, a put WriteQueue.try_lead and encode_single (write_batch.pxd),
# directly, not through an attribute lookup.

import cython

from lsmkv.base.mapping cimport KeyValueMapping
from lsmkv.lsm.memtable cimport MemTable
from lsmkv.lsm.read_state cimport ReadState
from lsmkv.lsm.table.reader cimport TableReader
from lsmkv.lsm.wal cimport LogWriter
from lsmkv.lsm.write_batch cimport encode_single, encode_single_framed
from lsmkv.base.write_queue cimport WriteQueue
from lsmkv.base.key_search cimport keys_bisect_left

cdef class DB(KeyValueMapping):
    cdef dict __dict__
    cdef public object path
    cdef public object options
    cdef public bint _closed
    cdef public bint _read_only
    cdef public bint _group_commit
    cdef public bint _l0_slowdown
    cdef public bint _l0_stop
    cdef public ReadState _state
    cdef public LogWriter _log
    cdef public WriteQueue _writes
    cdef public object _errors
    cdef public object _conflicts
    cdef public object _commits
    cdef public object _tables
    cdef public object _write_control
    cdef public long long _last_seq
    cdef public long long _logged_seq
    cdef public long long _user_bytes_written
    cdef public long long _wal_bytes_written
    cdef public long long _gets
    cdef public Py_ssize_t _write_buffer_size

    @cython.locals(mem=MemTable, log=LogWriter, writes=WriteQueue, seq="long long")
    cdef _write_one(self, int kind, bytes key, bytes value, object sync, Py_ssize_t user_bytes=*)

    @cython.locals(mem=MemTable)
    cdef MemTable _memtable_for_writing(self)
