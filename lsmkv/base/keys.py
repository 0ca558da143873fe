"""Argument validation shared by both engines: keys and values are bytes.

bytes, bytearray and memoryview are accepted and turned into bytes (the engines
store immutable copies); anything else raises TypeError naming the type.
Size limits are checked here so that both engines report them the same way.
"""

from __future__ import annotations

from .errors import SizeLimitError

#: Largest key lsmkv accepts, in bytes. (The B-tree documents its own, smaller
#: limit, which depends on its page size.)
MAX_KEY_SIZE = 64 * 1024 - 1
#: Largest value either engine accepts, in bytes.
MAX_VALUE_SIZE = 64 * 1024 * 1024


def as_key(obj: object, max_size: int = MAX_KEY_SIZE) -> bytes:
    """Return ``obj`` as bytes, or raise TypeError / SizeLimitError."""
    cls = type(obj)
    if cls is bytes:
        data = obj  # type: ignore[assignment]
    elif cls is bytearray or cls is memoryview or isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)  # type: ignore[arg-type]
    else:
        raise TypeError(f"key must be bytes, bytearray or memoryview, not {cls.__name__}")
    if len(data) > max_size:  # type: ignore[arg-type]
        raise SizeLimitError(f"key is {len(data)} bytes; the limit is {max_size}")  # type: ignore[arg-type]
    return data  # type: ignore[return-value]


def as_value(obj: object, max_size: int = MAX_VALUE_SIZE) -> bytes:
    """Return ``obj`` as bytes, or raise TypeError / SizeLimitError."""
    cls = type(obj)
    if cls is bytes:
        data = obj  # type: ignore[assignment]
    elif cls is bytearray or cls is memoryview or isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)  # type: ignore[arg-type]
    else:
        raise TypeError(f"value must be bytes, bytearray or memoryview, not {cls.__name__}")
    if len(data) > max_size:  # type: ignore[arg-type]
        raise SizeLimitError(f"value is {len(data)} bytes; the limit is {max_size}")  # type: ignore[arg-type]
    return data  # type: ignore[return-value]


def as_keys(keys: object, max_size: int = MAX_KEY_SIZE) -> list[bytes]:
    """The keys of a multi_get, each checked as :func:`as_key` checks one;
    a bad one raises TypeError (or SizeLimitError) naming its position.
    A single key (bytes, bytearray, memoryview or str) is refused rather
    than taken for a sequence of one-byte keys."""
    if isinstance(keys, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"multi_get takes an iterable of keys, not a single {type(keys).__name__}")
    try:
        items = list(keys)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(f"multi_get takes an iterable of keys, not {type(keys).__name__}") from None
    checked = items
    for i, key in enumerate(items):
        if type(key) is not bytes or len(key) > max_size:
            try:
                checked[i] = as_key(key, max_size)
            except TypeError as exc:
                raise TypeError(f"keys[{i}]: {exc}") from None
            except SizeLimitError as exc:
                raise SizeLimitError(f"keys[{i}]: {exc}") from None
    return checked


def as_optional_key(obj: object, name: str) -> bytes | None:
    """Validate an optional bound such as ``start``/``end``/``prefix``."""
    if obj is None:
        return None
    if not isinstance(obj, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be bytes, bytearray, memoryview or None, not {type(obj).__name__}")
    return bytes(obj)


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix``.

    None when no such key exists (the prefix is empty or all 0xff bytes).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def scan_bounds(start: object, end: object, prefix: object) -> tuple[bytes | None, bytes | None]:
    """Combine scan(start, end, prefix) arguments into one [lo, hi) range.

    A prefix narrows the range to keys starting with it; start/end narrow it
    further. None means unbounded on that side.
    """
    lo = as_optional_key(start, "start")
    hi = as_optional_key(end, "end")
    pfx = as_optional_key(prefix, "prefix")
    if pfx:
        if lo is None or lo < pfx:
            lo = pfx
        upper = prefix_upper_bound(pfx)
        if upper is not None and (hi is None or hi > upper):
            hi = upper
    return lo, hi
