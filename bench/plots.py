"""The report's plots (matplotlib, Agg backend, PNG).

* ``throughput.png``: operations per second per workload, one bar per engine
  (db_bench phases and YCSB workloads in separate panels; log scale).
* ``latency_cdf.png``: per workload, the fraction of operations at or below
  each latency, one line per engine (logit y axis, so the median and the
  99.9th percentile are both readable).
* ``amplification.png``: write amplification per writing phase, space
  amplification after every phase, read amplification per reading phase
  (where the engine has read counters).
* ``timeline.png``: throughput over time in the write-heavy phases, where
  flushes, compactions and checkpoints show as dips: a row per phase, a
  panel per engine with its own time axis.

Every function takes the results document and the output folder and returns
the file name it wrote (or None when there was nothing to plot). A bench
suite draws its own figures and hands them to ``rec.plot`` (bench/suites/),
which saves them with :func:`save_figure`.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter  # noqa: E402

from .report import engines_and_workloads  # noqa: E402

log = logging.getLogger(__name__)

__all__ = ["write_plots", "save_figure", "timeline_figure", "ENGINE_COLORS"]

ENGINE_COLORS = {"lsm": "#1f77b4", "btree": "#ff7f0e", "sqlite": "#2ca02c", "rocksdb": "#d62728",
                 "leveldb": "#9467bd", "lmdb": "#8c564b"}
_EXTRA_COLORS = ["#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
DPI = 110


def _color(engine: str, engines: list[str]) -> str:
    if engine in ENGINE_COLORS:
        return ENGINE_COLORS[engine]
    return _EXTRA_COLORS[engines.index(engine) % len(_EXTRA_COLORS)]


def _si(value: float, _pos: Any = None) -> str:
    if value is None or value != value:
        return ""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.3g}"


def _index(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["engine"], r["workload"]): r for r in doc["runs"]}


def _grouped_bars(ax, categories: list[str], engines: list[str], value, label_fmt=_si,
                  log: bool = True) -> None:
    """One group of bars per category, one bar per engine; missing values leave a gap."""
    n = max(1, len(engines))
    width = 0.8 / n
    x = np.arange(len(categories))
    top = 0.0
    for i, engine in enumerate(engines):
        vals = [value(engine, c) for c in categories]
        heights = [np.nan if v is None or (log and v <= 0) else v for v in vals]
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, heights, width, label=engine, color=_color(engine, engines))
        for p, v in zip(pos, heights):
            if v == v:  # not NaN
                top = max(top, v)
                ax.annotate(label_fmt(v), (p, v), textcoords="offset points", xytext=(0, 2), ha="center",
                            va="bottom", fontsize=6.5 if n > 3 else 7.5, rotation=90 if n > 3 else 0)
    ax.set_xticks(x)
    ax.set_xticklabels(categories, rotation=0 if len(categories) <= 7 else 30,
                       ha="center" if len(categories) <= 7 else "right")
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(_si))
        if top > 0:
            ax.set_ylim(top=top * (8 if n > 3 else 4))
    elif top > 0:
        ax.set_ylim(0, top * 1.25)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def plot_throughput(doc: dict[str, Any], out_dir: str) -> str | None:
    engines, workloads = engines_and_workloads(doc)
    if not workloads:
        return None
    idx = _index(doc)
    families = []
    for fam, title in (("db_bench", "db_bench-style phases"), ("ycsb", "YCSB workloads")):
        names = [w for w in workloads if any(idx.get((e, w), {}).get("family") == fam for e in engines)]
        if names:
            families.append((title, names))
    fig, axes = plt.subplots(len(families), 1, figsize=(max(9, 1.0 * max(len(n) for _, n in families)
                                                            * max(1, len(engines)) * 0.45 + 3), 4.4 * len(families)),
                             squeeze=False)
    for ax, (title, names) in zip(axes[:, 0], families):
        _grouped_bars(ax, names, engines, lambda e, w: idx.get((e, w), {}).get("ops_per_sec"))
        ax.set_title(f"{title}: throughput (operations/s, log scale; higher is better)", fontsize=10)
        ax.set_ylabel("operations / s")
    axes[0, 0].legend(ncol=len(engines), loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    name = "throughput.png"
    fig.savefig(os.path.join(out_dir, name), dpi=DPI)
    plt.close(fig)
    return name


def _cdf_points(run: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    cdf = run.get("latency_cdf")
    if not cdf or not cdf.get("us"):
        return None
    return np.asarray(cdf["us"]), np.asarray(cdf["fraction"])


def plot_latency_cdf(doc: dict[str, Any], out_dir: str) -> str | None:
    engines, workloads = engines_and_workloads(doc)
    idx = _index(doc)
    workloads = [w for w in workloads if any(idx.get((e, w), {}).get("latency_cdf") for e in engines)]
    if not workloads:
        return None
    cols = min(4, len(workloads))
    rows = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 0.6, 3.0 * rows + 0.9), squeeze=False)
    lo_p, hi_p = 0.01, 0.9999
    for k, w in enumerate(workloads):
        ax = axes[k // cols, k % cols]
        for e in engines:
            run = idx.get((e, w))
            pts = _cdf_points(run) if run else None
            if pts is None:
                continue
            x, y = pts
            y = np.clip(y, lo_p, hi_p)
            ax.plot(x, y, color=_color(e, engines), label=e, linewidth=1.4)
        ax.set_xscale("log")
        ax.set_yscale("logit")
        ax.set_ylim(lo_p, hi_p)
        ax.set_yticks([0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999])
        ax.set_yticklabels(["1%", "10%", "50%", "90%", "99%", "99.9%", "99.99%"], fontsize=7)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, p: ""))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, p: f"{v:g}"))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(w, fontsize=9)
        ax.grid(alpha=0.3, which="major")
        if k % cols == 0:
            ax.set_ylabel("operations at or below", fontsize=8)
        if k // cols == rows - 1 or k + cols >= len(workloads):
            ax.set_xlabel("latency (µs, log scale)", fontsize=8)
    for k in range(len(workloads), rows * cols):
        axes[k // cols, k % cols].axis("off")
    _title_and_legend(fig, engines, "Latency distribution per workload: share of operations at or below "
                                    "each latency (further left is faster; the top of each curve is the tail)")
    name = "latency_cdf.png"
    fig.savefig(os.path.join(out_dir, name), dpi=DPI)
    plt.close(fig)
    return name


def plot_amplification(doc: dict[str, Any], out_dir: str) -> str | None:
    engines, workloads = engines_and_workloads(doc)
    idx = _index(doc)
    if not workloads:
        return None
    writing = [w for w in workloads if any((idx.get((e, w)) or {}).get("write_amp") for e in engines)]
    reading = [w for w in workloads if any((idx.get((e, w)) or {}).get("read_amp") is not None for e in engines)]
    panels = 1 + bool(writing) + bool(reading)
    width = min(18.0, max(10.0, 0.33 * len(workloads) * max(2, len(engines)) + 4))
    fig, axes = plt.subplots(panels, 1, figsize=(width, 3.9 * panels), squeeze=False)
    axes = list(axes[:, 0])
    if writing:
        ax = axes.pop(0)
        _grouped_bars(ax, writing, engines, lambda e, w: (idx.get((e, w)) or {}).get("write_amp"),
                      label_fmt=lambda v, p=None: f"{v:.3g}" if v < 1000 else _si(v))
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        ax.set_title("Write amplification: bytes written to the engine's files / user bytes written "
                     "(log scale; lower is better)", fontsize=10)
        ax.set_ylabel("write amp (x)")
        ax.legend(ncol=len(engines), loc="upper left", fontsize=8, frameon=False)
    ax = axes.pop(0)
    x = np.arange(len(workloads))
    lowest, highest = 1.0, 1.0
    for e in engines:
        ys = [(idx.get((e, w)) or {}).get("space_amp") for w in workloads]
        ys = [np.nan if v is None else v for v in ys]
        ax.plot(x, ys, marker="o", color=_color(e, engines), label=e)
        if not all(np.isnan(ys)):
            lowest, highest = min(lowest, np.nanmin(ys)), max(highest, np.nanmax(ys))
        last = next((i for i in range(len(ys) - 1, -1, -1) if not np.isnan(ys[i])), None)
        if last is not None:
            ax.annotate(f"{ys[last]:.2g}", (x[last], ys[last]), textcoords="offset points", xytext=(6, 0),
                        va="center", fontsize=7, color=_color(e, engines))
    # Phases that start on freshly loaded data (YCSB's 1,000-byte records, for example).
    for w in {ld["before"] for ld in doc.get("loads", [])}:
        if w in workloads:
            k = workloads.index(w) - 0.5
            ax.axvline(k, color="grey", linewidth=0.8, linestyle="--")
            ax.annotate("new data loaded", (k, 1), xycoords=("data", "axes fraction"), xytext=(3, -10),
                        textcoords="offset points", fontsize=7, color="grey")
    # Room for a labelled tick below and above the data.
    ax.set_ylim(min(0.5, lowest) * 0.8, max(2.0, highest) * 1.3)
    ax.set_xlim(-0.4, len(workloads) - 0.4)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(x)
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator([0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128]))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, p: ""))
    ax.set_title("Space amplification after each phase: database directory bytes / live key+value bytes "
                 "(log scale; lower is better)", fontsize=10)
    ax.set_ylabel("space amp (x)")
    ax.grid(alpha=0.3)
    ax.legend(ncol=len(engines), loc="upper left", fontsize=8, frameon=False)
    if reading:
        ax = axes.pop(0)
        have = [e for e in engines if any((idx.get((e, w)) or {}).get("read_amp") is not None for w in reading)]
        _grouped_bars(ax, reading, have, lambda e, w: (idx.get((e, w)) or {}).get("read_amp"),
                      label_fmt=lambda v, p=None: f"{v:.2g}", log=False)
        missing = [e for e in engines if e not in have]
        note = f" ({', '.join(missing)}: no read counters)" if missing else ""
        ax.set_title(f"Read amplification: blocks/pages read from files per get, from engine counters{note}",
                     fontsize=10)
        ax.set_ylabel("reads per get")
        ax.legend(ncol=len(have), loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    name = "amplification.png"
    fig.savefig(os.path.join(out_dir, name), dpi=DPI)
    plt.close(fig)
    return name


def plot_timeline(doc: dict[str, Any], out_dir: str) -> str | None:
    fig = timeline_figure(doc)
    if fig is None:
        return None
    return save_figure(fig, out_dir, "timeline.png")


def timeline_figure(doc: dict[str, Any]):
    """The figure of timeline.png (None without write-heavy phases): one
    row per write-heavy phase, one panel per engine, each with axes of its
    own: the x axis spans that engine's own phase and the y axis its own
    rates, so a fast engine's dips are as readable as a slow one's
    (throughput.png compares the engines' levels)."""
    engines, workloads = engines_and_workloads(doc)
    idx = _index(doc)
    heavy = [w for w in workloads if any((idx.get((e, w)) or {}).get("write_heavy") for e in engines)]
    if not heavy:
        return None
    rows, cols = len(heavy), len(engines)
    fig, axes = plt.subplots(rows, cols, figsize=(2.9 * cols + 0.6, 2.1 * rows + 0.9), squeeze=False)
    for r, w in enumerate(heavy):
        for c, e in enumerate(engines):
            ax = axes[r, c]
            tl = (idx.get((e, w)) or {}).get("timeline")
            if tl and tl.get("ops_per_sec"):
                rates = np.asarray(tl["ops_per_sec"], dtype=float)
                t = (np.arange(len(rates)) + 0.5) * tl["interval_s"]
                ax.plot(t, rates, color=_color(e, engines), linewidth=1.1,
                        marker="o" if len(rates) < 12 else None, markersize=3)
                ax.set_xlim(0, len(rates) * tl["interval_s"])
            else:
                ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center", va="center",
                        fontsize=8, color="0.5")
                ax.set_xticks([])
                ax.set_yticks([])
            ax.yaxis.set_major_formatter(FuncFormatter(_si))
            ax.set_ylim(bottom=0)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if r == 0:
                ax.set_title(e, fontsize=9, color=_color(e, engines))
            if c == 0:
                ax.set_ylabel(f"{w}\noperations / s", fontsize=8)
            if r == rows - 1:
                ax.set_xlabel("seconds into the phase", fontsize=8)
    _title_and_legend(fig, engines, "Throughput over time in the write-heavy phases, a panel per engine with axes "
                                    "of its own (dips, down to 0 for a stall, are flushes, compactions, "
                                    "checkpoints)")
    return fig


def _title_and_legend(fig, engines: list[str], title: str) -> None:
    """A figure title with the engines' legend under it, above all panels."""
    height = fig.get_figheight()
    title_h, legend_h = 0.32 / height, 0.62 / height
    fig.suptitle(title, fontsize=10, y=1 - 0.08 / height, va="top")
    handles = [plt.Line2D([], [], color=_color(e, engines), linewidth=2) for e in engines]
    fig.legend(handles, engines, loc="upper center", bbox_to_anchor=(0.5, 1 - title_h), ncol=len(engines),
               frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - legend_h))


def save_figure(fig, out_dir: str, name: str) -> str:
    """Write ``fig`` as ``out_dir/name`` (PNG at the report's resolution) and close it."""
    fig.savefig(os.path.join(out_dir, name), dpi=DPI)
    plt.close(fig)
    return name


def write_plots(doc: dict[str, Any], out_dir: str) -> list[str]:
    """All plots; returns the file names written."""
    written = []
    for fn in (plot_throughput, plot_latency_cdf, plot_amplification, plot_timeline):
        name = fn(doc, out_dir)
        if name:
            written.append(name)
    return written
