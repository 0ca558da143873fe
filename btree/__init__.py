"""btree: the read-optimized counterpart to lsmkv, an on-disk B+tree.

Built in its own issue; it will expose ``btree.open(path, **options)`` with
the same API as ``lsmkv.open``.
"""
