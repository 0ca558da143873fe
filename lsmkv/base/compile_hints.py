"""The ``cython`` names the hot modules' type declarations use, for when
Cython is not installed.

A compiled module's C types are declared beside its source, in a ``.pxd``
file, wherever Cython allows; a declaration a ``.pxd`` cannot carry (the
local variables of a method of a plain Python class) is a decorator in the
``.py``: ``@cython.locals(node=Node, i=cython.Py_ssize_t)``. A module that
uses one imports Cython's ``cython`` module, or else this stand-in::

    try:
        import cython
    except ImportError:
        from lsmkv.base.compile_hints import cython

Run as Python, the decorators change nothing: ``cython.locals(...)``
returns the function as it is and every C type name is a placeholder.

Where a step is fast in C one way and in Python another -- reading a
block's integers in place, byte by byte, against one ``struct`` call --
the source says both, side by side, under ``cython.compiled`` (False here
and in Python; the compiler keeps only the compiled side): an ``if
cython.compiled:`` branch (the bloom probes of ``TableReader.get``, the
offsets test of ``block.check_block``), or a
function the pure build rebinds to its Python form (``block._unpack_pair``
and its kin). Both sides are tested, on both builds, against each other's
answers.
"""

from __future__ import annotations


class _Hints:
    """The subset of Cython's pure-Python ``cython`` module lsmkv uses."""

    #: False: the module runs as Python (True only in Cython's own module when compiled).
    compiled = False

    @staticmethod
    def locals(**types):
        """Declares the C types of a function's local variables (no-op here)."""
        return _unchanged

    def __getattr__(self, name: str):
        return name  # a C type name (Py_ssize_t, bint, ...): only read by the compiler


def _unchanged(function):
    return function


cython = _Hints()
