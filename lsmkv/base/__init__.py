"""What both engines share: the layer under ``lsmkv.lsm`` and ``btree``.

The error hierarchy (errors.py), the file-system layer every byte of I/O
goes through (fs.py, and fault_fs.py, which tests swap in), checksums,
key and value checks, the timing wheel and what it runs on (timer.py,
clock.py, executor.py, purgatory.py), group commit (write_queue.py,
log_syncer.py, and group_commit.py, which joins them for a DB), deadlines of values with a ttl (ttl.py), the default cache
size (cache_size.py), metadata entries (meta.py), the mapping protocol
(mapping.py), the cursor machinery (cursor.py), the standard library's dbm
interface (dbm.py), engine detection of a directory (dbdir.py, with the
LSM's file names, filenames.py), destroy (destroy.py), what check and
repair report (check_report.py, repair_report.py, set_aside.py) and
optimistic transactions (transaction.py over write_set.py, read_set.py
and key_ranges.py; their validation, conflicts.py; retrying, retry.py),
merge operators (merge_operators.py).

Nothing here imports ``lsmkv.lsm``, ``btree`` or anything above the
engines (tests/test_layers.py checks it).
"""
