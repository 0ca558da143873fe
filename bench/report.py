"""report.md, and the tables it shares with the terminal.

The tables are built here once as plain rows of strings (:func:`summary_table`,
:func:`detail_table`, :func:`amplification_table`); report.md renders them as
Markdown, the CLI renders the same rows with rich.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .builds import build_table_rows
from .config import format_size

__all__ = ["Table", "summary_table", "detail_table", "amplification_table", "by_op_table", "write_report",
           "suite_tables", "write_suite_report",
           "fmt_rate", "fmt_us", "fmt_amp"]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    #: (row, column) cells that hold the best value of their row.
    best: set[tuple[int, int]] = field(default_factory=set)
    title: str = ""
    caption: str = ""


def fmt_rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}"


def fmt_us(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_amp(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 100 else f"{v:,.0f}"


def fmt_ratio(ours: float | None, reference: float | None) -> str:
    """``ours / reference`` as "1.23x": two decimals from 0.1 up, one from 10
    up, two significant digits below 0.1 (a ratio of 0.0037 is not "0.00x");
    "-" when either side is missing or the reference is 0."""
    if ours is None or not reference:
        return "-"
    r = ours / reference
    if r >= 10:
        return f"{r:.1f}x"
    if r >= 0.1 or r == 0:
        return f"{r:.2f}x"
    return f"{r:.2g}x"


def engines_and_workloads(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The engines and the workloads of a results document, each in the order first run."""
    engines: list[str] = []
    workloads: list[str] = []
    for run in doc["runs"]:
        if run["engine"] not in engines:
            engines.append(run["engine"])
        if run["workload"] not in workloads:
            workloads.append(run["workload"])
    return engines, workloads


def _why_not_run(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    """{(engine, workload): why it has no figures}: the workloads an engine
    skips, and every phase of an engine that failed."""
    why: dict[tuple[str, str], str] = {}
    workloads = [w["name"] for w in doc.get("workloads", [])]
    for eng in doc.get("engines", []):
        name = eng["engine"]
        for w, reason in (eng.get("skipped") or {}).items():
            why[(name, w)] = f"skipped by {name}: {reason}"
        if eng.get("error"):
            for w in workloads:
                why.setdefault((name, w), f"not run, the engine failed: {eng['error']}")
    return why


def summary_table(doc: dict[str, Any]) -> Table:
    """Rows: workloads; columns: engines; cells: ops/s and p99 latency. Best
    throughput marked. A cell without figures is ``-``, with a footnote
    number ``[n]`` when the run knows why (a skip's reason, an engine's
    failure), the reasons listed in the caption."""
    engines, workloads = engines_and_workloads(doc)
    idx = {(r["engine"], r["workload"]): r for r in doc["runs"]}
    why = _why_not_run(doc)
    footnotes: dict[str, int] = {}  # reason -> its number
    table = Table(["workload"] + [f"{e} ops/s (p99 µs)" for e in engines],
                  title="Throughput (operations/s) and p99 latency (µs)",
                  caption="Best throughput of each row in bold.")
    for i, w in enumerate(workloads):
        row = [w]
        rates = []
        for e in engines:
            run = idx.get((e, w))
            if run is None:
                reason = why.get((e, w))
                if reason is None:
                    row.append("-")
                else:
                    row.append(f"- [{footnotes.setdefault(reason, len(footnotes) + 1)}]")
                rates.append(None)
                continue
            p99 = (run.get("latency_us") or {}).get("p99")
            row.append(f"{fmt_rate(run['ops_per_sec'])} ({fmt_us(p99)})")
            rates.append(run["ops_per_sec"])
        valid = [r for r in rates if r is not None]
        if len(valid) > 1:
            best = max(valid)
            table.best.add((i, 1 + rates.index(best)))
        table.rows.append(row)
    if footnotes:
        table.caption += "\n" + "\n".join(f"[{n}] {reason}" for reason, n in footnotes.items())
    return table


def build_table(doc: dict[str, Any]) -> Table:
    """What compiling buys: each project engine's rows on the compiled build
    beside the same rows on the pure build (bench/builds.py), and the ratio."""
    table = Table(["engine", "workload", "compiled ops/s", "pure ops/s", "compiled / pure"],
                  title="The compiled build against the pure build",
                  caption="The same engines, data and settings; the pure build ran after the compiled one "
                          "in a child process with LSMKV_NO_EXTENSIONS=1.")
    for engine, workload, compiled, pure in build_table_rows(doc):
        table.rows.append([engine, workload, fmt_rate(compiled), fmt_rate(pure), f"{compiled / pure:.2f}x"])
    return table


def detail_table(doc: dict[str, Any]) -> Table:
    table = Table(["engine", "workload", "ops", "ops/s", "p50 µs", "p95 µs", "p99 µs", "p99.9 µs", "max µs",
                   "write amp", "(engine)", "space amp", "read amp", "CPU s", "peak RSS MiB"],
                  title="Every run",
                  caption="write amp: bytes written to the engine's files (/proc/self/io wchar, or the engine's "
                          "counter where larger) / user bytes written; (engine): from the engine's own counter "
                          "alone; space amp: directory bytes / "
                          "live bytes after the phase; read amp: blocks or pages read per get (engine counters).")
    for run in doc["runs"]:
        lat = run.get("latency_us") or {}
        table.rows.append([
            run["engine"], run["workload"], f"{run['operations']:,}", fmt_rate(run["ops_per_sec"]),
            fmt_us(lat.get("p50")), fmt_us(lat.get("p95")), fmt_us(lat.get("p99")), fmt_us(lat.get("p999")),
            fmt_us(lat.get("max")), fmt_amp(run.get("write_amp")), fmt_amp(run.get("write_amp_engine")),
            fmt_amp(run.get("space_amp")), fmt_amp(run.get("read_amp")), f"{run.get('cpu_s', 0):.2f}",
            f"{run.get('peak_rss_mb', 0):.0f}",
        ])
    return table


def amplification_table(doc: dict[str, Any]) -> Table:
    """Per engine: write and space amplification after the first write-heavy phase, space
    amplification at the end, read amplification of the first phase that has it, stalls,
    compaction bytes, and CPU per operation over the whole run."""
    engines, workloads = engines_and_workloads(doc)
    idx = {(r["engine"], r["workload"]): r for r in doc["runs"]}
    heavy = next((w for w in workloads if any((idx.get((e, w)) or {}).get("write_heavy") for e in engines)), None)
    reading = next((w for w in workloads
                    if any((idx.get((e, w)) or {}).get("read_amp") is not None for e in engines)), None)
    last = workloads[-1] if workloads else None
    headers = ["engine"]
    if heavy:
        headers += [f"write amp {heavy}", f"space amp after {heavy}"]
    if last and last != heavy:
        headers.append(f"space amp after {last}")
    if reading:
        headers.append(f"read amp {reading}")
    headers += ["write amp whole run", "stall s", "compaction written", "CPU µs/op"]
    table = Table(headers, title="Amplification and cost per engine",
                  caption="write amp whole run: bytes written to the files over all phases and loads / user bytes "
                          "they wrote. CPU µs/op: CPU time of the process and its helpers over all phases / "
                          "operations.")
    for e in engines:
        runs = [r for r in doc["runs"] if r["engine"] == e]
        get = lambda w, k, e=e: (idx.get((e, w)) or {}).get(k)  # noqa: E731
        row = [e]
        if heavy:
            row += [fmt_amp(get(heavy, "write_amp")), fmt_amp(get(heavy, "space_amp"))]
        if last and last != heavy:
            row.append(fmt_amp(get(last, "space_amp")))
        if reading:
            row.append(fmt_amp(get(reading, "read_amp")))
        stalls = [r["stall_s"] for r in runs if r.get("stall_s") is not None]
        comp = [r["compaction_bytes_written"] for r in runs if r.get("compaction_bytes_written") is not None]
        ops = sum(r["operations"] for r in runs)
        cpu = sum(r.get("cpu_s") or 0 for r in runs)
        loads = [ld for ld in doc.get("loads", []) if ld["engine"] == e]
        written = [x.get("bytes_written") for x in runs + loads]
        user = sum(x.get("user_bytes_written") or 0 for x in runs + loads)
        whole = sum(written) / user if user and None not in written else None
        row += [fmt_amp(whole), "-" if not stalls else f"{sum(stalls):.2f}",
                "-" if not comp else format_size(sum(comp)),
                f"{cpu / ops * 1e6:.1f}" if ops else "-"]
        table.rows.append(row)
    return table


def by_op_table(doc: dict[str, Any]) -> Table:
    """Throughput and latency per operation type, for phases that mix operation types."""
    table = Table(["engine", "workload", "operation", "ops", "ops/s", "p50 µs", "p99 µs", "p99.9 µs"],
                  title="Per operation type (mixed workloads)")
    for run in doc["runs"]:
        by_op = run.get("by_op") or {}
        if len(by_op) < 2:
            continue
        for op, m in by_op.items():
            lat = m.get("latency_us") or {}
            table.rows.append([run["engine"], run["workload"], op, f"{m['operations']:,}",
                               fmt_rate(m["ops_per_sec"]), fmt_us(lat.get("p50")), fmt_us(lat.get("p99")),
                               fmt_us(lat.get("p999"))])
    return table


def markdown(table: Table) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in table.headers) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.headers))) + "|"]
    for r, row in enumerate(table.rows):
        cells = [f"**{esc(c)}**" if (r, k) in table.best else esc(c) for k, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    out = "\n".join(lines)
    if table.caption:
        out += "\n\n" + table.caption.replace("\n", "\n\n")  # a paragraph per caption line
    return out


def _machine_line(machine: dict[str, Any]) -> str:
    fs = machine.get("db_filesystem") or {}
    mem = machine.get("memory_bytes")
    parts = [machine.get("cpu", "?"), f"{machine.get('cores', '?')} cores",
             f"{format_size(mem)} RAM" if mem else None, machine.get("os"), machine.get("python"),
             f"database on {fs.get('type')} ({fs.get('device')})" if fs else None]
    return "; ".join(p for p in parts if p)


def write_report(doc: dict[str, Any], out_dir: str, plots: list[str]) -> str:
    cfg = doc["config"]
    lines = ["# lsmkv bench report", ""]
    lines.append(f"Command: `{cfg.get('command', 'lsmkv bench')}`")
    lines.append("")
    lines.append(f"Run {doc.get('started', '?')}, {doc.get('wall_s', 0):.0f} s wall time, on "
                 f"{_machine_line(doc.get('machine', {}))}.")
    lines.append("")
    sync = "each write fsynced (--sync)" if cfg.get("sync") else "writes handed to the OS, not fsynced"
    cache = format_size(cfg.get("cache_size")) if cfg.get("cache_size") is not None else "engine defaults"
    lines.append(f"Settings: {cfg['records']:,} records, {cfg['key_size']}-byte keys, {cfg['value_size']}-byte "
                 f"values ({cfg['value_compressibility']:.0%} compressible), {sync}, cache {cache} per engine, "
                 f"{cfg['threads']} thread(s), seed {cfg['seed']}"
                 + (f", rate {cfg['rate']:g} ops/s" if cfg.get("rate") else "")
                 + (f", at most {cfg['duration']:g} s per phase" if cfg.get("duration") else "") + ".")
    lines.append("")
    lines.append("Engines:")
    for eng in doc.get("engines", []):
        status = f" **failed: {eng['error']}**" if eng.get("error") else ""
        lines.append(f"- `{eng['engine']}`: {eng['title']}, {eng['version']}{status}")
    for name, reason in (doc.get("unavailable") or {}).items():
        lines.append(f"- `{name}`: not run ({reason})")
    lines.append("")
    lines.append("Workloads (in run order, on one database per engine):")
    for w in doc.get("workloads", []):
        lines.append(f"- `{w['name']}`: {w['description']}")
    lines.append("")
    if not doc["runs"]:
        lines.append("No phase completed.")
    else:
        for table in (summary_table(doc), amplification_table(doc)):
            lines += [f"## {table.title}", "", markdown(table), ""]
        builds = build_table(doc)
        if builds.rows:
            lines += [f"## {builds.title}", "", markdown(builds), ""]
        titles = {"throughput.png": "Throughput per workload",
                  "latency_cdf.png": "Latency distribution per workload",
                  "amplification.png": "Write, space and read amplification",
                  "timeline.png": "Throughput over time (write-heavy phases)"}
        if plots:
            lines += ["## Plots", ""]
            for p in plots:
                lines += [f"### {titles.get(p, p)}", "", f"![{titles.get(p, p)}]({p})", ""]
        for table in (detail_table(doc), by_op_table(doc)):
            if table.rows:
                lines += [f"## {table.title}", "", markdown(table), ""]
    if doc.get("loads"):
        lines += ["## Untimed loads", "",
                  "Phases that need data the database does not hold are preceded by a load (batches of "
                  "1,024 puts, no sync, then flush), which is not part of any phase's figures.", ""]
        lines.append("| engine | before | records | seconds | records/s |")
        lines.append("|---|---|---:|---:|---:|")
        for ld in doc["loads"]:
            lines.append(f"| {ld['engine']} | {ld['before']} | {ld['records']:,} | {ld['seconds']:.2f} | "
                         f"{fmt_rate(ld['records_per_sec'])} |")
        lines.append("")
    notes = []
    for eng in doc.get("engines", []):
        notes += eng.get("notes") or []
    for w in doc.get("workloads", []):
        if w.get("ycsb_unknown"):
            notes.append(f"{w['name']}: unknown YCSB properties (not applied): {', '.join(w['ycsb_unknown'])}")
        for prop, why in (w.get("ycsb_ignored") or {}).items():
            notes.append(f"{w['name']}: YCSB property `{prop}` has no effect here: {why}")
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    lines += ["How every figure is measured, and what this bench cannot control, is written down in "
              "docs/benchmarking.md of the lsmkv repository. `results.json` holds every figure; "
              "`results.csv` the scalar ones.", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return path


def suite_tables(doc: dict[str, Any]) -> list[Table]:
    """A suite run's comparison tables (as the suite recorded them) and a
    table of every run it recorded."""
    tables = [Table(list(t["columns"]), [list(r) for r in t["rows"]], title=t["title"], caption=t.get("note", ""))
              for t in doc.get("tables", [])]
    runs = Table(["engine", "workload", "ops", "ops/s", "p50 µs", "p99 µs", "max µs"], title="Every run")
    for run in doc["runs"]:
        lat = run.get("latency_us") or {}
        runs.rows.append([run["engine"], run["workload"], f"{run['operations']:,}", fmt_rate(run["ops_per_sec"]),
                          fmt_us(lat.get("p50")), fmt_us(lat.get("p99")), fmt_us(lat.get("max"))])
    if runs.rows:
        tables.append(runs)
    return tables


def write_suite_report(doc: dict[str, Any], out_dir: str) -> str:
    """report.md of a bench suite run (``lsmkv bench --suite NAME``)."""
    cfg = doc["config"]
    lines = [f"# lsmkv bench report: suite `{cfg['suite']}`", "",
             f"Command: `{cfg.get('command', 'lsmkv bench --suite ' + cfg['suite'])}`", "",
             f"Run {doc.get('started', '?')}, {doc.get('wall_s', 0):.0f} s wall time, on "
             f"{_machine_line(doc.get('machine', {}))}.", ""]
    if cfg.get("description"):
        lines += [cfg["description"], ""]
    options = cfg.get("options") or {}
    if options:
        lines += ["Options: " + ", ".join(f"`{k}={v}`" for k, v in options.items()) + ".", ""]
    if doc.get("error"):
        lines += [f"**The suite failed: {doc['error']}** (what it recorded before that is below).", ""]
    for table in suite_tables(doc):
        lines += [f"## {table.title}", "", markdown(table), ""]
    titles = doc.get("plot_titles") or {}
    for plot in doc.get("plots", []):
        title = titles.get(plot, plot)
        lines += [f"## {title}", "", f"![{title}]({plot})", ""]
    lines += ["`results.json` holds every figure; `results.csv` the scalar ones.", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return path
