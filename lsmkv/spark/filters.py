"""Filter pushdown: which of Spark's filters on ``key`` become key ranges.

``key_ranges(filters, codec)`` takes the filters Spark offers the reader
(``pyspark.sql.datasource`` Filter objects, ANDed) and returns the ranges
to read and the filters Spark must still evaluate. A filter is taken only
when the ranges express it exactly -- the rows read are then exactly the
rows that satisfy it -- so results are identical with and without
pushdown:

* ``key = v``, ``key <=> v`` (v not null), ``key IN (...)``: point ranges;
* ``key > v``, ``>=``, ``<``, ``<=``: one open-ended range;
* ``key LIKE 'p%'`` (StringStartsWith): ``[p, successor of p)``;
* ``key IS NOT NULL`` (always true: keys are never null), ``key IS NULL``
  (never true): the ranges unchanged, or none.

With ``decode`` on, filter values arrive as str and are encoded with the
decode charset. Equality and IN are exact for any charset (decoding is
one-to-one); ranges and prefixes only for charsets whose byte order is the
order of the strings Spark compares (UTF-8, ASCII, Latin-1), so for other
charsets they are left to Spark. Any other filter, one on ``value``, or a
value of an unexpected type is left to Spark. This module knows the
Filter classes by name only and never imports pyspark at import time.
"""

from __future__ import annotations

import codecs
from typing import Any, Sequence

from .ranges import ALL, Range, after, intersect, normalize, point, prefix_end

#: Charsets whose encoded byte order equals the code-point order of the
#: strings (Spark compares strings as UTF-8 bytes, i.e. by code point).
ORDER_PRESERVING = {"utf-8", "ascii", "latin-1", "iso8859-1"}


def _canonical(codec: str | None) -> str | None:
    return None if codec is None else codecs.lookup(codec).name


class _Untranslatable(Exception):
    """A filter that cannot be turned into exact ranges."""


class KeyFilterTranslator:
    """Turns filters into ranges for the ``key`` column: binary (``codec``
    None) or a string column decoded with ``codec``."""

    def __init__(self, codec: str | None) -> None:
        self.codec = _canonical(codec)
        self.ordered = self.codec is None or self.codec in ORDER_PRESERVING

    def _encode(self, value: Any) -> bytes | None:
        """The key bytes of a filter value; None when no key can equal it
        (a string the charset cannot encode)."""
        if self.codec is None:
            if isinstance(value, (bytes, bytearray, memoryview)):
                return bytes(value)
            raise _Untranslatable
        if isinstance(value, str):
            try:
                return value.encode(self.codec)
            except UnicodeEncodeError:
                return None
        raise _Untranslatable

    def _points(self, values: Sequence[Any]) -> list[Range]:
        out = []
        for v in values:
            if v is None:
                continue  # key = NULL is never true
            k = self._encode(v)
            if k is not None:
                out.append(point(k))
        return normalize(out)

    def ranges_of(self, f: Any) -> list[Range]:
        """The exact ranges of one filter, or _Untranslatable."""
        name = type(f).__name__
        attribute = getattr(f, "attribute", None)
        if attribute != ("key",):
            raise _Untranslatable
        if name == "IsNotNull":
            return list(ALL)
        if name == "IsNull":
            return []
        value = getattr(f, "value", None)
        if name in ("EqualTo", "EqualNullSafe"):
            return self._points([value])
        if name == "In":
            return self._points(list(value))
        if not self.ordered or value is None:
            raise _Untranslatable
        if name == "StringStartsWith":
            if self.codec is None and not isinstance(value, (bytes, bytearray)):
                # On a binary column Spark's startsWith gets bytes; a str
                # here would be compared as its UTF-8 bytes.
                if not isinstance(value, str):
                    raise _Untranslatable
                prefix = value.encode("utf-8")
            else:
                prefix = self._encode(value)
                if prefix is None:
                    return []
            return [(prefix, prefix_end(prefix))]
        if name not in ("GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual"):
            raise _Untranslatable
        k = self._encode(value)
        if k is None:
            raise _Untranslatable  # a bound outside the charset still orders keys: leave it to Spark
        if name == "GreaterThan":
            return [(after(k), None)]
        if name == "GreaterThanOrEqual":
            return [(k, None)]
        if name == "LessThan":
            return [(None, k)]
        return [(None, after(k))]


def key_ranges(filters: Sequence[Any], codec: str | None) -> tuple[list[Range], list[Any]]:
    """(ranges to read, filters left to Spark) for ANDed ``filters``."""
    translator = KeyFilterTranslator(codec)
    ranges = list(ALL)
    rest = []
    for f in filters:
        try:
            ranges = intersect(ranges, translator.ranges_of(f))
        except _Untranslatable:
            rest.append(f)
    return ranges, rest
