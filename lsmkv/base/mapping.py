"""KeyValueMapping: the mapping protocol (``collections.abc.MutableMapping``)
over an engine's own operations, shared by both engines' DB classes.

A DB is a persistent dict of bytes to bytes: ``for key in db`` iterates in
key order, ``keys()``, ``values()`` and ``items()`` are views that scan the
database when iterated, ``len(db)`` counts live keys, and ``pop``,
``popitem``, ``setdefault``, ``update`` and ``clear`` behave as a dict's.
What this module needs from the class it is mixed into: ``get(key,
default)``, ``put``, ``delete``, ``scan(start, end, reverse, prefix)``,
``write_batch()`` (with ``delete_range``), ``stats()`` (its
``max_key_size``, when the store's key limit is below MAX_KEY_SIZE) and
``_live_count()``. It owns no state and never touches
an engine's internals.

The class is ``collections.abc.MutableMapping``'s by registration, not
by inheritance, and writes out the mixin methods it would have inherited
(``pop``, ``setdefault``): the compiled build makes it an extension type
(mapping.pxd), so that the lsm DB can be one too (its put path then reads
its fields as C struct members), and an extension type cannot inherit a
Python class.

Two deliberate differences from a dict: a DB compares equal only to itself
and stays hashable (two handles on one directory, or a DB and a dict with
the same contents, are different objects, and an equality that scans whole
databases would be a trap); and the views are live: they show the database
as it is when they are iterated.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from typing import Any

from .keys import MAX_KEY_SIZE


class _Keys(KeysView):
    __slots__ = ()

    def __iter__(self) -> Iterator[bytes]:
        for key, _ in self._mapping.scan():
            yield key


class _Values(ValuesView):
    __slots__ = ()

    def __iter__(self) -> Iterator[bytes]:
        for _, value in self._mapping.scan():
            yield value


class _Items(ItemsView):
    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._mapping.scan())


_MISSING = object()


class KeyValueMapping:
    """The mapping protocol for a DB (see the module docstring)."""

    __slots__ = ()

    def __getitem__(self, key: object) -> bytes:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: object, value: object) -> None:
        self.put(key, value)

    def __delitem__(self, key: object) -> None:
        """Delete ``key``; KeyError if it is absent (as for a dict). A read
        then a write, so not atomic with writes of other threads; ``delete``
        is the blind, atomic delete."""
        if self.get(key) is None:
            raise KeyError(key)
        self.delete(key)

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def __iter__(self) -> Iterator[bytes]:
        for key, _ in self.scan():
            yield key

    def __len__(self) -> int:
        return self._live_count()

    def __reversed__(self) -> Iterator[bytes]:
        """The keys in descending order (a dict's reversed() is its keys
        newest first; a sorted store's, largest first)."""
        for key, _ in self.scan(reverse=True):
            yield key

    def keys(self) -> KeysView:
        return _Keys(self)

    def values(self) -> ValuesView:
        return _Values(self)

    def items(self) -> ItemsView:
        return _Items(self)

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        """Put every pair of ``other`` (a mapping or an iterable of pairs) in
        one atomic write batch. Keyword arguments are refused (keys are bytes)."""
        if kwargs:
            raise TypeError("keys must be bytes, so update() takes no keyword arguments "
                            f"(got {', '.join(sorted(kwargs))})")
        pairs: Iterable
        if isinstance(other, Mapping):
            pairs = other.items()
        elif hasattr(other, "keys"):
            pairs = ((k, other[k]) for k in other.keys())
        else:
            pairs = other
        with self.write_batch() as batch:
            for pair in pairs:
                key, value = pair
                batch.put(key, value)

    def pop(self, key: object, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value; ``default`` if it is absent,
        KeyError if no default is given. A read then a write, as ``del``."""
        value = self.get(key)
        if value is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self.delete(key)
        return value

    def setdefault(self, key: object, default: object = None) -> Any:
        """The value of ``key``; if it is absent, put ``default`` first and
        return it. A read then a write, as ``del``."""
        value = self.get(key)
        if value is None:
            self.put(key, default)
            return default
        return value

    def popitem(self) -> tuple[bytes, bytes]:
        """Remove and return the pair with the smallest key; KeyError if empty."""
        for key, value in self.scan():
            self.delete(key)
            return key, value
        raise KeyError("popitem(): the database is empty")

    def clear(self) -> None:
        """Delete every key, in one atomic write batch: a range delete from
        the empty key up to the largest key the store can hold, and a delete
        of that key. Expired values not yet reclaimed go too, so a clock set
        back later brings none of them back (lsmkv/base/ttl.py)."""
        top = b"\xff" * self.stats().get("max_key_size", MAX_KEY_SIZE)
        with self.write_batch() as batch:
            batch.delete_range(b"", top)
            batch.delete(top)


MutableMapping.register(KeyValueMapping)
