# Cython declarations augmenting lsmkv/lsm/table/bloom.py in the compiled
# build (the .py stays the source): a key's bloom hash is MurmurHash3 in C
# integers (murmur3_first_word), called as a C function by a table build's
# run of keys (bloom_hash_list) and by a get's probe (table/reader.py).

import cython

cdef unsigned long long _M64, _K1, _K2, _F1, _F2, _MASK32

cpdef bloom_hash(bytes key)

@cython.locals(out=list, i=Py_ssize_t)
cpdef list bloom_hash_list(list keys, list new_key)

@cython.locals(p="const unsigned char*", n=Py_ssize_t, at=Py_ssize_t, tail=Py_ssize_t,
               mask="unsigned long long", c1="unsigned long long", c2="unsigned long long",
               h1="unsigned long long", h2="unsigned long long", k1="unsigned long long", k2="unsigned long long")
cpdef unsigned long long murmur3_first_word(bytes key) except? 0

@cython.locals(word="unsigned long long", j=Py_ssize_t)
cdef inline unsigned long long _le_word(const unsigned char* p, Py_ssize_t at, Py_ssize_t width)

cdef inline unsigned long long _fmix64(unsigned long long k)

@cython.locals(out=bytearray, p="unsigned char*", i=Py_ssize_t, j="unsigned long long", h="unsigned long long",
               h1="unsigned long long", h2="unsigned long long", bit="unsigned long long")
cpdef bytearray filter_bits(list hashes, unsigned long long m, unsigned long long k)
