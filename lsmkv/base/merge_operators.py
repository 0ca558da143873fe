"""Merge operators: how ``db.merge(key, operand)`` folds operands into a value.

A merge operator is a callable ``(key, existing, operands) -> bytes``:
``existing`` is the key's value before the first operand (None if the key
is absent or deleted) and ``operands`` the operands merged since, oldest
first. It is RocksDB's "full merge" in Python terms. The engines call it
where they must produce a value: a read of a key that has operands, and
(lsm) a compaction that folds them; an operator must therefore be a pure
function of its arguments, the same on every call, and must accept the
values it produced itself as ``existing``.

An operator may have a ``name`` attribute: the engines store it beside
the operands, so opening a store with a different operator than the one
its operands were written with is an error naming both (RocksDB checks the
merge operator's name the same way). A plain function is named by its
``__qualname__``.

The built-ins cover the common cases:

* :class:`UInt64Add`: counters, each value and operand a little-endian
  unsigned 64-bit integer, added modulo 2**64 (``db.merge(k,
  UInt64Add.operand(1))``);
* :class:`Append`: values that grow, operands appended with a delimiter;
* :class:`Max`: the largest of the value and the operands, as bytes
  compare.

A bad operand (a uint64 operand that is not 8 bytes) raises
:class:`~lsmkv.base.errors.InvalidArgumentError` when it is merged
(:func:`check_operand`), so a store never holds an operand its operator
cannot fold. A stored value the operator cannot fold (a counter whose
value is 3 bytes long) is :class:`~lsmkv.base.errors.MergeError` on the read.
"""

from __future__ import annotations

import struct
from typing import Callable, Protocol, Sequence, runtime_checkable

from .errors import InvalidArgumentError, MergeError

_UINT64 = struct.Struct("<Q")
_MASK = (1 << 64) - 1


@runtime_checkable
class MergeOperator(Protocol):
    """What ``merge_operator=`` takes: ``(key, existing, operands) -> bytes``."""

    def __call__(self, key: bytes, existing: bytes | None, operands: Sequence[bytes]) -> bytes: ...


def operator_name(operator: Callable) -> str:
    """The name stored beside a store's operands: ``operator.name`` if it
    has one, else the callable's qualified name."""
    name = getattr(operator, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(operator, "__qualname__", None) or type(operator).__qualname__


def check_operand(operator: Callable, operand: bytes) -> None:
    """Raise InvalidArgumentError if ``operator`` can never fold ``operand``
    (built-ins with a fixed operand size check it; other operators take any)."""
    check = getattr(operator, "check_operand", None)
    if check is not None:
        check(operand)


class UInt64Add:
    """Counters: the value and each operand are little-endian unsigned
    64-bit integers; the result is their sum modulo 2**64. An absent key
    counts as 0."""

    name = "lsmkv.uint64add"

    @staticmethod
    def operand(delta: int) -> bytes:
        """The operand that adds ``delta`` (a negative delta subtracts, modulo 2**64)."""
        if not isinstance(delta, int) or isinstance(delta, bool):
            raise TypeError(f"delta must be an int, not {type(delta).__name__}")
        return _UINT64.pack(delta & _MASK)

    @staticmethod
    def decode(value: bytes) -> int:
        """A counter's value as an int."""
        if len(value) != 8:
            raise InvalidArgumentError(f"a uint64 counter is 8 bytes, not {len(value)}")
        return _UINT64.unpack(value)[0]

    @staticmethod
    def check_operand(operand: bytes) -> None:
        if len(operand) != 8:
            raise InvalidArgumentError(f"a uint64add operand is 8 bytes (little-endian), not {len(operand)}; "
                                       "make one with UInt64Add.operand(n)")

    def __call__(self, key: bytes, existing: bytes | None, operands: Sequence[bytes]) -> bytes:
        if existing is None:
            total = 0
        elif len(existing) == 8:
            total = _UINT64.unpack(existing)[0]
        else:
            raise MergeError(f"key {key[:40]!r}: its value is {len(existing)} bytes, "
                             "not the 8 bytes of a uint64add counter")
        for operand in operands:
            total += _UINT64.unpack(operand)[0]
        return _UINT64.pack(total & _MASK)

    def __repr__(self) -> str:
        return "UInt64Add()"


class Append:
    """Values that grow: each operand is appended to the value, with
    ``delimiter`` between (none before the first piece of an absent key)."""

    def __init__(self, delimiter: bytes = b",") -> None:
        if not isinstance(delimiter, bytes):
            raise TypeError(f"delimiter must be bytes, not {type(delimiter).__name__}")
        self.delimiter = delimiter
        self.name = f"lsmkv.append:{delimiter.hex()}"

    def __call__(self, key: bytes, existing: bytes | None, operands: Sequence[bytes]) -> bytes:
        pieces = list(operands) if existing is None else [existing, *operands]
        return self.delimiter.join(pieces)

    def __repr__(self) -> str:
        return f"Append({self.delimiter!r})"


class Max:
    """The largest of the value and the operands, compared as bytes (use
    fixed-width big-endian numbers to keep a numeric maximum)."""

    name = "lsmkv.max"

    def __call__(self, key: bytes, existing: bytes | None, operands: Sequence[bytes]) -> bytes:
        return max(operands) if existing is None else max(existing, *operands)

    def __repr__(self) -> str:
        return "Max()"


def fold(operator: Callable, key: bytes, existing: bytes | None, operands: Sequence[bytes]) -> bytes:
    """``operator(key, existing, operands)``, checked: the result must be
    bytes, and what the operator raises becomes a MergeError naming the key
    and the operator."""
    try:
        result = operator(key, existing, operands)
    except MergeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's operator: any failure is a MergeError
        raise MergeError(f"merge operator {operator_name(operator)} failed on key {key[:40]!r}: {exc!r}") from exc
    if type(result) is not bytes:
        if isinstance(result, (bytearray, memoryview)):
            return bytes(result)
        raise MergeError(f"merge operator {operator_name(operator)} returned {type(result).__name__} "
                         f"for key {key[:40]!r}, not bytes")
    return result


def builtin_operator(name: str) -> Callable | None:
    """The built-in operator whose name is ``name`` (as a store records
    it: ``lsmkv.uint64add``, ``lsmkv.max``, ``lsmkv.append:<delimiter in
    hex>``), or None: how a tool that does not know the application's
    operator (the ``lsmkv`` command) opens a store of built-in operands."""
    if name == UInt64Add.name:
        return UInt64Add()
    if name == Max.name:
        return Max()
    prefix = "lsmkv.append:"
    if name.startswith(prefix):
        try:
            return Append(bytes.fromhex(name[len(prefix):]))
        except ValueError:
            return None
    return None
