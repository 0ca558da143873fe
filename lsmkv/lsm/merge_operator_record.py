"""The merge operator's name in the manifest: what keeps merge operands
from being read with an operator other than the one they were written for.

The first time a handle writes a merge operand, the name of its operator
is recorded in the manifest, durably, before any operand reaches the log;
from then on the store opens only with an operator of that name
(lsmkv/base/merge_operators.py names operators). Before any operand is
written, each is shown to the operator (``check_operand``), so a bad one
raises before anything is written. This module never writes the log and
never touches the DB object: it is handed the VersionSet and how to check
and record.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

from lsmkv.base.errors import InvalidArgumentError, OptionError, ReadOnlyError
from lsmkv.base.merge_operators import check_operand, operator_name

from .version import VersionEdit, VersionSet
from .write_batch import MERGE


class MergeOperatorRecord:
    """One handle's merge operator (None: the handle refuses merges) and
    the name its store's manifest records. ``check_open()`` raises once the
    handle is closed; ``check_writable()`` raises while writes are stopped;
    ``apply_edit(edit)`` records an edit in the manifest."""

    __slots__ = ("_path", "_operator", "_versions", "_read_only", "_check_open", "_check_writable", "_apply_edit",
                 "_lock")

    def __init__(self, path: str, operator: object, versions: VersionSet, read_only: bool,
                 check_open: Callable[[], None], check_writable: Callable[[], None],
                 apply_edit: Callable[[VersionEdit], object]) -> None:
        self._path, self._operator, self._versions, self._read_only = path, operator, versions, read_only
        self._check_open, self._check_writable, self._apply_edit = check_open, check_writable, apply_edit
        #: Held while the operator's name is first recorded in the manifest.
        self._lock = threading.Lock()

    def check_at_open(self) -> None:
        """At open: a store whose manifest records a merge operator's name
        (it may hold operands) opens only with an operator of that name."""
        stored = self._versions.merge_operator
        if stored is None:
            return
        given = self._operator
        if given is None:
            raise OptionError(f"{self._path} holds merge operands written with the merge operator {stored!r}; "
                              f"open it with merge_operator= (an operator named {stored!r})")
        name = operator_name(given)
        if name != stored:
            raise OptionError(f"{self._path} holds merge operands written with the merge operator {stored!r}, "
                              f"not {name!r} (the merge_operator given)")

    def prepare(self, ops: Iterable[tuple[int, bytes, bytes]]) -> None:
        """Before merge operands are written: the handle must be writable
        and have an operator that accepts each of them; the first time,
        the operator's name is recorded in the manifest (durably, before
        any operand reaches the log)."""
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(f"{self._path} was opened with read_only=True; writes are not allowed")
        operator = self._operator
        if operator is None:
            raise InvalidArgumentError(f"{self._path}: merge needs a merge operator: open the database with "
                                       "merge_operator=")
        for kind, _, operand in ops:
            if kind == MERGE:
                check_operand(operator, operand)
        name = operator_name(operator)
        if self._versions.merge_operator != name:
            with self._lock:
                if self._versions.merge_operator != name:
                    self._check_writable()
                    edit = VersionEdit()
                    edit.merge_operator = name
                    self._apply_edit(edit)
