"""The result of a consistency check (``lsmkv check DB``), shared by both engines."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CheckReport:
    """What a check found. ``ok`` is False when any problem was found.

    ``problems`` holds one readable line per problem (naming file and offset or
    page); ``details`` holds counts of what was verified (files, blocks, pages,
    entries...), for the report the CLI prints.
    """

    engine: str
    path: str
    problems: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems
