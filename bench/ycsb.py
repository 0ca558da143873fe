"""YCSB workload definitions: property files and the core workloads A-F.

:func:`parse_properties` reads a Java-style properties file (the format of
YCSB's ``workloads/workloada`` ... ``workloadf``); :func:`spec_from_properties`
turns properties into a :class:`YcsbSpec` with YCSB's property names, defaults
and meanings. Properties this bench understands are applied; properties it
knows but that cannot matter here (e.g. ``table``, ``readallfields``, since a
record's fields are packed into one value) are listed as *ignored*; anything
else is listed as *unknown*. Neither list is silently dropped: both end up in
the results and on the terminal.

The built-in workloads ``ycsb-a`` ... ``ycsb-f`` are exactly YCSB's workload
files, stored below as property text and parsed by the same code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["YcsbError", "YcsbSpec", "parse_properties", "load_workload_file", "spec_from_properties",
           "builtin_spec", "BUILTIN"]


class YcsbError(ValueError):
    """A workload file or property that cannot be run."""


#: YCSB's core workloads: the operation mix and distribution properties of
#: their property files (recordcount/operationcount come from the run).
BUILTIN: dict[str, str] = {
    "a": "readproportion=0.5\nupdateproportion=0.5\nscanproportion=0\ninsertproportion=0\n"
         "requestdistribution=zipfian\n",
    "b": "readproportion=0.95\nupdateproportion=0.05\nscanproportion=0\ninsertproportion=0\n"
         "requestdistribution=zipfian\n",
    "c": "readproportion=1\nupdateproportion=0\nscanproportion=0\ninsertproportion=0\n"
         "requestdistribution=zipfian\n",
    "d": "readproportion=0.95\nupdateproportion=0\nscanproportion=0\ninsertproportion=0.05\n"
         "requestdistribution=latest\n",
    "e": "readproportion=0\nupdateproportion=0\nscanproportion=0.95\ninsertproportion=0.05\n"
         "requestdistribution=zipfian\nmaxscanlength=100\nscanlengthdistribution=uniform\n",
    "f": "readproportion=0.5\nupdateproportion=0\nscanproportion=0\ninsertproportion=0\n"
         "readmodifywriteproportion=0.5\nrequestdistribution=zipfian\n",
}

#: Properties that are applied (with YCSB's defaults).
APPLIED = {
    "recordcount": "1000", "operationcount": "1000",
    "readproportion": "0.95", "updateproportion": "0.05", "insertproportion": "0.0",
    "scanproportion": "0.0", "readmodifywriteproportion": "0.0",
    "requestdistribution": "uniform",
    "minscanlength": "1", "maxscanlength": "1000", "scanlengthdistribution": "uniform",
    "insertorder": "hashed", "zeropadding": "1", "insertstart": "0", "insertcount": None,
    "fieldcount": "10", "fieldlength": "100", "minfieldlength": "1", "fieldlengthdistribution": "constant",
    "hotspotdatafraction": "0.2", "hotspotopnfraction": "0.8",
    "exponential.percentile": "95", "exponential.frac": "0.8571428571",
    # Client properties, mapped onto the bench's own knobs.
    "threadcount": None, "target": None, "maxexecutiontime": None,
}

#: Properties recognised but without effect here, with the reason.
IGNORED = {
    "workload": "the core workload is the only one",
    "table": "one key space per database",
    "readallfields": "a record's fields are packed into one value, always read whole",
    "readallfieldsbyname": "a record's fields are packed into one value, always read whole",
    "writeallfields": "a record's fields are packed into one value, always written whole",
    "fieldnameprefix": "fields are not named in a packed value",
    "dataintegrity": "values are not verified",
    "measurementtype": "latency is always recorded in a log-bucketed histogram",
    "measurement.interval": "latency is always measured per operation",
    "histogram.buckets": "latency is always recorded in a log-bucketed histogram",
    "hdrhistogram.percentiles": "the bench reports p50/p95/p99/p99.9/max",
    "timeseries.granularity": "throughput over time uses the bench's own intervals",
    "maxscanrate": "scans are not rate-limited",
    "scanoptimelimit": "scans are not time-limited",
    "discardscannedrecord": "scanned records are always discarded",
    "status.interval": "progress is shown live",
    "exporter": "results are written as results.json/csv",
    "exportfile": "results are written to the results folder",
    "db": "engines are chosen with --engines",
    "dotransactions": "the bench loads when needed, then runs transactions",
    "core_workload_insertion_retry_limit": "inserts are not retried",
    "core_workload_insertion_retry_interval": "inserts are not retried",
    "insertionkeepgoingonerror": "an engine error stops the engine's run",
    "fieldlengthhistogram": "fieldlengthdistribution=histogram is not supported",
}

_DISTRIBUTIONS = {"uniform", "zipfian", "latest", "hotspot", "sequential", "exponential"}


@dataclass
class YcsbSpec:
    """A YCSB core workload, resolved to the values the generator needs."""

    name: str
    recordcount: int
    operationcount: int
    proportions: dict[str, float]   # read, update, insert, scan, readmodifywrite (sum 1)
    requestdistribution: str
    minscanlength: int
    maxscanlength: int
    scanlengthdistribution: str
    hashed: bool
    zeropadding: int
    insertstart: int
    insertcount: int
    fieldcount: int
    fieldlength: int
    minfieldlength: int
    fieldlengthdistribution: str
    hotspotdatafraction: float
    hotspotopnfraction: float
    exponential_percentile: float
    exponential_frac: float
    threadcount: int | None = None
    target: float | None = None
    maxexecutiontime: float | None = None
    ignored: dict[str, str] = field(default_factory=dict)   # property -> why it has no effect
    unknown: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def record_size(self) -> int:
        """Bytes of one packed record (for a constant field length)."""
        return self.fieldcount * self.fieldlength

    @property
    def write_fraction(self) -> float:
        p = self.proportions
        return p["update"] + p["insert"] + p["readmodifywrite"]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text: ``key=value``, ``key: value`` or ``key value``;
    ``#``/``!`` comments; a trailing backslash continues a line."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if _ends_with_odd_backslashes(line):
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split_property(line)
        props[key] = value
    return props


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(escapes.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def load_workload_file(path: str) -> YcsbSpec:
    """Read and resolve a YCSB workload file; the workload is named after the file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise YcsbError(f"cannot read YCSB workload file {path}: {exc.strerror}") from None
    name = "ycsb:" + os.path.basename(path)
    return spec_from_properties(parse_properties(text), name=name)


def builtin_spec(letter: str, recordcount: int, operationcount: int) -> YcsbSpec:
    """YCSB core workload ``letter`` (a-f) with the run's record and operation counts."""
    letter = letter.lower()
    if letter not in BUILTIN:
        raise YcsbError(f"no YCSB core workload {letter!r}; there are {', '.join(sorted(BUILTIN))}")
    props = parse_properties(BUILTIN[letter])
    props["recordcount"] = str(recordcount)
    props["operationcount"] = str(operationcount)
    return spec_from_properties(props, name=f"ycsb-{letter}")


def spec_from_properties(props: dict[str, str], name: str) -> YcsbSpec:
    """Resolve properties with YCSB's defaults; raises YcsbError for values that cannot run."""
    def get(key: str) -> str | None:
        value = props.get(key)
        return APPLIED[key] if value is None else value

    def num(key: str, kind: type = int, minimum: float | None = None) -> int | float:
        text = get(key)
        try:
            value = kind(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise YcsbError(f"{name}: {key}={text!r} is not a valid {'integer' if kind is int else 'number'}") from None
        if minimum is not None and value < minimum:
            raise YcsbError(f"{name}: {key}={text} must be at least {minimum}")
        return value

    recordcount = int(num("recordcount", int, 1))
    insertstart = int(num("insertstart", int, 0))
    insertcount = int(num("insertcount", int, 1)) if props.get("insertcount") else recordcount - insertstart
    if recordcount < insertstart + insertcount:
        raise YcsbError(f"{name}: recordcount must be at least insertstart + insertcount")
    proportions = {
        "read": float(num("readproportion", float, 0)),
        "update": float(num("updateproportion", float, 0)),
        "insert": float(num("insertproportion", float, 0)),
        "scan": float(num("scanproportion", float, 0)),
        "readmodifywrite": float(num("readmodifywriteproportion", float, 0)),
    }
    total = sum(proportions.values())
    if total <= 0:
        raise YcsbError(f"{name}: all operation proportions are zero")
    proportions = {k: v / total for k, v in proportions.items()}

    distribution = get("requestdistribution").strip().lower()  # type: ignore[union-attr]
    if distribution not in _DISTRIBUTIONS:
        raise YcsbError(f"{name}: requestdistribution={distribution!r} is not one of "
                        f"{', '.join(sorted(_DISTRIBUTIONS))}")
    scan_dist = get("scanlengthdistribution").strip().lower()  # type: ignore[union-attr]
    if scan_dist not in ("uniform", "zipfian"):
        raise YcsbError(f"{name}: scanlengthdistribution={scan_dist!r} must be uniform or zipfian")
    order = get("insertorder").strip().lower()  # type: ignore[union-attr]
    if order not in ("hashed", "ordered"):
        raise YcsbError(f"{name}: insertorder={order!r} must be hashed or ordered")
    field_dist = get("fieldlengthdistribution").strip().lower()  # type: ignore[union-attr]
    if field_dist not in ("constant", "uniform", "zipfian"):
        raise YcsbError(f"{name}: fieldlengthdistribution={field_dist!r} is not supported "
                        "(constant, uniform or zipfian)")
    minscan, maxscan = int(num("minscanlength", int, 1)), int(num("maxscanlength", int, 1))
    if maxscan < minscan:
        raise YcsbError(f"{name}: maxscanlength must be at least minscanlength")
    minfield, fieldlength = int(num("minfieldlength", int, 0)), int(num("fieldlength", int, 0))
    if field_dist != "constant" and fieldlength < minfield:
        raise YcsbError(f"{name}: fieldlength must be at least minfieldlength")

    workload = props.get("workload", "site.ycsb.workloads.CoreWorkload")
    if not workload.endswith("CoreWorkload"):
        raise YcsbError(f"{name}: workload={workload} is not supported; only the core workload "
                        "(site.ycsb.workloads.CoreWorkload) is")

    def optional(key: str, kind: type) -> int | float | None:
        return num(key, kind, 0) if props.get(key) not in (None, "") else None  # type: ignore[return-value]

    threadcount = optional("threadcount", int)
    target = optional("target", float)
    maxexec = optional("maxexecutiontime", float)
    return YcsbSpec(
        name=name, recordcount=recordcount, operationcount=int(num("operationcount", int, 0)),
        proportions=proportions, requestdistribution=distribution,
        minscanlength=minscan, maxscanlength=maxscan, scanlengthdistribution=scan_dist,
        hashed=(order == "hashed"), zeropadding=int(num("zeropadding", int, 1)),
        insertstart=insertstart, insertcount=insertcount,
        fieldcount=int(num("fieldcount", int, 1)), fieldlength=fieldlength, minfieldlength=minfield,
        fieldlengthdistribution=field_dist,
        hotspotdatafraction=float(num("hotspotdatafraction", float, 0)),
        hotspotopnfraction=float(num("hotspotopnfraction", float, 0)),
        exponential_percentile=float(num("exponential.percentile", float, 0)),
        exponential_frac=float(num("exponential.frac", float, 0)),
        threadcount=int(threadcount) if threadcount else None,
        target=float(target) if target else None,
        maxexecutiontime=float(maxexec) if maxexec else None,
        ignored={k: IGNORED[k] for k in props if k in IGNORED},
        unknown=sorted(k for k in props if k not in APPLIED and k not in IGNORED),
        properties=dict(props),
    )
