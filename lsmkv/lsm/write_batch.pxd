# Cython declarations augmenting lsmkv/lsm/write_batch.py in the compiled
# build (the .py stays the source): a put's log record is encoded by a C call
# from the DB's write path (lsmkv/lsm/db.py _write_one), not a Python call.

cpdef bytes encode_single(long long seq, int kind, bytes key, bytes value)
