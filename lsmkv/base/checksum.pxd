# Cython declarations augmenting lsmkv/base/checksum.py in the compiled
# build (the .py stays the source): a page checksum's start computed in C
# integers, called from the page checks (btree/node.py) as C functions.
import cython

@cython.locals(register="unsigned long", ones="unsigned long", top="unsigned long", poly="unsigned long",
               shift=int, step=int)
cpdef unsigned long start_skipping(unsigned long head)

@cython.locals(head="unsigned long")
cpdef crc32_past_stored(bytes data)
