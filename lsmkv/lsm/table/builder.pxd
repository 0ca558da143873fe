# Cython declarations augmenting lsmkv/lsm/table/builder.py in the compiled
# build (the .py stays the source): a sorted run's counts for the table's
# properties (run_counts, on a flush's path) are one loop of C integers.

import cython

@cython.locals(i=Py_ssize_t, seq_kind="unsigned long long", kind="unsigned long long",
               seq="unsigned long long", smallest="unsigned long long", largest="unsigned long long",
               tombstones=Py_ssize_t, merges=Py_ssize_t, ttl=Py_ssize_t)
cpdef tuple run_counts(list seq_kinds)
