"""A sorted-list model of a cursor (where it must stand after each move,
and what iterating it yields from there), and the walk that makes the same
random moves on a real cursor and on the model and checks that they agree
after each one."""

from __future__ import annotations

import bisect

import pytest

class CursorModel:
    """Where a cursor over sorted (key, value) pairs within [lower, upper)
    must be after each move."""

    def __init__(self, items, lower, upper):
        self.items = sorted((k, v) for k, v in items
                            if (lower is None or k >= lower) and (upper is None or k < upper))
        self.keys = [k for k, _ in self.items]
        self.pos = None
        self.positioned = False

    def iterated(self):
        """What iterating the cursor yields: from the current entry to the
        end; nothing once a positioned cursor is off its entries; all of the
        range from a cursor never positioned."""
        if self.pos is not None:
            return self.items[self.pos:]
        return [] if self.positioned else self.items

    def move(self, op, key):
        n = len(self.keys)
        self.positioned = True
        if op == "seek":
            i = bisect.bisect_left(self.keys, key)
            self.pos = i if i < n else None
        elif op == "seek_for_prev":
            i = bisect.bisect_right(self.keys, key) - 1
            self.pos = i if i >= 0 else None
        elif op == "first":
            self.pos = 0 if n else None
        elif op == "last":
            self.pos = n - 1 if n else None
        elif op == "next":
            self.pos = self.pos + 1 if self.pos + 1 < n else None
        elif op == "prev":
            self.pos = self.pos - 1 if self.pos > 0 else None


def check_moves(cursor, model: CursorModel, move_list) -> None:
    """Make each (op, key) move of ``move_list`` on ``cursor`` and on
    ``model``; after each, the cursor must stand where the model does and
    iterate as it does; next and prev off the entries must raise ValueError."""
    for op, key in move_list:
        if op in ("next", "prev") and model.pos is None:
            assert not cursor.valid()
            with pytest.raises(ValueError):
                getattr(cursor, op)()
            continue
        {"seek": lambda: cursor.seek(key), "seek_for_prev": lambda: cursor.seek_for_prev(key),
         "first": cursor.seek_to_first, "last": cursor.seek_to_last, "next": cursor.next,
         "prev": cursor.prev}[op]()
        model.move(op, key)
        if model.pos is None:
            assert not cursor.valid(), (op, key, cursor.key() if cursor.valid() else None)
        else:
            assert cursor.valid(), (op, key)
            assert (cursor.key(), cursor.value()) == model.items[model.pos], (op, key)
        assert list(cursor) == model.iterated(), (op, key)
