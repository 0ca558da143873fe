"""The run's configuration: every knob of ``lsmkv bench`` and its default.

:class:`BenchConfig` is what the CLI builds from its arguments and what the
runner, the results files and the report read. The parsing helpers for
sizes (``8MiB``), engine options (``k=v`` with typed values) and workload
lists (``readrandom:50000``) live here too, so that they are defined once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lsmkv.base.errors import OptionError
from lsmkv.lsm.options import parse_option_text

__all__ = ["BenchConfig", "WorkloadRequest", "ConfigError", "DEFAULT_ENGINES", "DEFAULT_WORKLOADS",
           "parse_size", "parse_option", "parse_workloads", "format_size"]


class ConfigError(ValueError):
    """An argument that cannot be used (reported as one line)."""


#: Engines of the default run (those that are available): the two engines,
#: SQLite (a C B-tree), and what Python programs use as a persistent dict
#: (diskcache, and the standard library's dbm; neither keeps key order, so
#: they skip the scanning workloads).
DEFAULT_ENGINES = ["lsm", "btree", "sqlite", "diskcache", "dbm"]

#: The default run: a write-heavy fill, the db_bench reads and scans, the YCSB
#: core workloads, and deletes; sized (records, operations) so that three
#: engines finish in about two minutes on a 2-core machine.
DEFAULT_WORKLOADS = ("fillrandom,overwrite,readrandom,readmissing,seekrandom,readseq,"
                     "ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f,deleterandom")
DEFAULT_RECORDS = 100_000
DEFAULT_OPERATIONS = 30_000
DEFAULT_CACHE_SIZE = 8 << 20

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


@dataclass(frozen=True)
class WorkloadRequest:
    """One entry of ``--workloads``: a workload name and, optionally, its own operation count."""

    name: str
    operations: int | None = None

    def __str__(self) -> str:
        return self.name if self.operations is None else f"{self.name}:{self.operations}"


@dataclass
class BenchConfig:
    engines: list[str] = field(default_factory=lambda: list(DEFAULT_ENGINES))
    workloads: list[WorkloadRequest] = field(default_factory=lambda: parse_workloads(DEFAULT_WORKLOADS))
    ycsb_files: list[str] = field(default_factory=list)
    records: int = DEFAULT_RECORDS
    operations: int = DEFAULT_OPERATIONS
    key_size: int = 16
    value_size: int = 100
    value_compressibility: float = 0.5
    threads: int = 1
    sync: bool = False
    cache_size: int | None = DEFAULT_CACHE_SIZE
    seed: int = 42
    duration: float | None = None
    rate: float | None = None
    warmup: int | None = None
    scan_length: int = 10
    engine_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    out: str | None = None
    db_dir: str | None = None
    keep_db: bool = False
    plots: bool = True
    #: Knobs given explicitly on the command line (they override a YCSB file's properties).
    explicit: set[str] = field(default_factory=set)
    command: str = "lsmkv bench"

    def validate(self) -> None:
        positive = {"records": self.records, "operations": self.operations, "threads": self.threads,
                    "key-size": self.key_size, "scan-length": self.scan_length}
        for name, value in positive.items():
            if value < 1:
                raise ConfigError(f"--{name} must be at least 1, not {value}")
        if self.value_size < 0:
            raise ConfigError(f"--value-size must not be negative, not {self.value_size}")
        if not 0.0 <= self.value_compressibility < 1.0:
            raise ConfigError(f"--value-compressibility must be in [0, 1), not {self.value_compressibility}")
        if self.duration is not None and self.duration <= 0:
            raise ConfigError(f"--duration must be positive, not {self.duration}")
        if self.rate is not None and self.rate <= 0:
            raise ConfigError(f"--rate must be positive, not {self.rate}")
        if self.warmup is not None and self.warmup < 0:
            raise ConfigError(f"--warmup must not be negative, not {self.warmup}")
        if len(str(self.records)) > self.key_size:
            raise ConfigError(f"--key-size {self.key_size} is too small for {self.records} records")
        if not self.engines:
            raise ConfigError("no engines chosen")
        if not self.workloads and not self.ycsb_files:
            raise ConfigError("no workloads chosen")

    def warmup_ops(self, phase_operations: int) -> int:
        """Untimed reads before a reading phase: --warmup, or 10% of the phase (at most 5,000)."""
        if self.warmup is not None:
            return self.warmup
        return min(phase_operations // 10, 5000)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["workloads"] = [str(w) for w in self.workloads]
        data["explicit"] = sorted(self.explicit)
        return data


def parse_size(text: str) -> int:
    """``8388608``, ``8M``, ``8MiB``, ``1.5G`` -> bytes."""
    s = text.strip().lower().replace("_", "")
    i = len(s)
    while i > 0 and s[i - 1].isalpha():
        i -= 1
    number, unit = s[:i].strip(), s[i:]
    if unit not in _SIZE_UNITS or not number:
        raise ConfigError(f"{text!r} is not a size (examples: 1048576, 64KiB, 8M, 1GiB)")
    try:
        value = float(number)
    except ValueError:
        raise ConfigError(f"{text!r} is not a size (examples: 1048576, 64KiB, 8M, 1GiB)") from None
    if value < 0:
        raise ConfigError(f"{text!r}: a size must not be negative")
    return int(value * _SIZE_UNITS[unit])


def format_size(n: int | float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` -> (key, typed value): int, float, bool (true/false/yes/no/on/off), None or str
    (lsmkv.lsm.options.parse_option_text), ConfigError if it is not of that form."""
    try:
        return parse_option_text(text)
    except OptionError as e:
        raise ConfigError(str(e)) from None


def parse_workloads(text: str) -> list[WorkloadRequest]:
    """``fillrandom,readrandom:50000`` -> requests (names are checked by the workload factory)."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, count = item.partition(":")
        ops = None
        if sep:
            try:
                ops = int(count.replace("_", ""))
            except ValueError:
                raise ConfigError(f"workload {item!r}: the count after ':' must be an integer") from None
            if ops < 1:
                raise ConfigError(f"workload {item!r}: the count must be at least 1")
        out.append(WorkloadRequest(name.strip().lower(), ops))
    return out
