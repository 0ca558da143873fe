# Cython declarations augmenting lsmkv/base/checksum.py in the compiled
# build (the .py stays the source): a page checksum's start computed in C
# integers, called from the page checks (btree/node.py) as C functions.
import cython

@cython.locals(register="unsigned long", shift=int)
cpdef unsigned long start_skipping(unsigned long head)

cdef unsigned long _POLY, _TOP_BIT, _LOW32

@cython.locals(step=int)
cdef inline unsigned long _back_over(unsigned long register, unsigned long byte)

@cython.locals(head="unsigned long")
cpdef crc32_past_stored(bytes data)
