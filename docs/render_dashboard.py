"""Render docs/img/dashboard.png: the Grafana dashboard's panels, drawn from real demo data.

Runs ``otel-loopguard demo`` in a subprocess, scrapes it with a real Prometheus (the one the
integration tests use, ``tests/_prometheus.py``), waits about a minute, then evaluates every
panel expression of ``dashboards/loopguard.json`` as a range query
(``/api/v1/query_range``, step 2 s) and draws the panels with matplotlib at their ``gridPos``. No
Grafana is involved: the image shows the real series, laid out like the dashboard.

    pip install matplotlib   # not a project dependency
    python docs/render_dashboard.py [--seconds 60] [--out docs/img/dashboard.png]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.ticker import PercentFormatter

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from _prometheus import PrometheusServer, free_port, running_prometheus  # noqa: E402
from test_dashboards import (  # noqa: E402
    ALERTS,
    PANELS_KEY,
    iter_panels,
    load_dashboard,
    panel_list,
)

STEP_SECONDS = 2
RATE_INTERVAL = "10s"
"""``$__rate_interval`` here; Grafana would pick 4 s for a 1 s scrape, 10 s draws smoother."""
WARMUP_SECONDS = 12
"""Scrape this long before the plotted range starts, so no rate window is half empty."""
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_BG, _PANEL, _TEXT, _GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
_COLORS = ("#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9",
           "#705da0", "#37872d", "#fade2a")


def expand(expr: str, range_seconds: int) -> str:
    """Return plain PromQL: Grafana macros replaced, ``$prompt_template`` matching everything."""
    expr = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$__range", f"{range_seconds}s")
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def legend(fmt: str | None, metric: dict[str, str]) -> str:
    """Render a Grafana ``legendFormat`` for one series."""
    if not fmt or fmt == "__auto":
        return ", ".join(f"{k}={v}" for k, v in sorted(metric.items())) or "value"
    return _LEGEND.sub(lambda m: metric.get(m[1], ""), fmt)


@contextmanager
def running_demo(seconds: float) -> Iterator[str]:
    """Run the demo for ``seconds`` in a subprocess; yield its ``host:port``."""
    port = free_port()
    cmd = [sys.executable, "-m", "otel_loopguard", "demo", "--duration", str(seconds),
           "--metrics-port", str(port), "--quiet", "--seed", "42"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def range_query(prom: PrometheusServer, expr: str, start: float, end: float) -> list[Any]:
    """Return the matrix of a ``/api/v1/query_range`` call."""
    data = prom.api("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}",
                                            "end": f"{end:.3f}", "step": str(STEP_SECONDS)})
    return list(data["result"])


def style_axes(ax: Axes, title: str) -> None:
    """Give an axes the dark look of a Grafana panel."""
    ax.set_facecolor(_PANEL)
    ax.set_title(title, color=_TEXT, fontsize=10, loc="left")
    ax.tick_params(colors=_TEXT, labelsize=7)
    for spine in ax.spines.values():
        spine.set_color(_GRID)
    ax.grid(color=_GRID, linewidth=0.5)


def draw_timeseries(ax: Axes, panel: dict[str, Any], series: list[tuple[str, Any]]) -> None:
    """Plot every series of a time-series panel, or "No data" like Grafana."""
    style_axes(ax, panel["title"])
    if not series:
        ax.text(0.5, 0.5, "No data", color=_TEXT, ha="center", va="center",
                transform=ax.transAxes, fontsize=12)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    for index, (label, values) in enumerate(sorted(series, key=lambda s: s[0])):
        times = [datetime.fromtimestamp(float(t)) for t, _ in values]
        ax.plot(times, [float(v) for _, v in values], label=label, linewidth=1.4,
                color=_COLORS[index % len(_COLORS)])
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    ax.xaxis.set_major_locator(mdates.SecondLocator(bysecond=range(0, 60, 10)))
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if unit == "percentunit":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, facecolor=_BG, edgecolor=_BG, labelcolor=_TEXT, loc="upper left",
              bbox_to_anchor=(0, -0.1), ncol=max(1, min(4, len(series) // 3 + 1)),
              frameon=False, handlelength=1.2, columnspacing=1.0)


def draw_table(ax: Axes, panel: dict[str, Any], prom: PrometheusServer, seconds: int) -> None:
    """Render a table panel from its instant queries as Grafana's merge and organize would.

    One row per label set; the labels' columns, then one value column per query (``Value #A``),
    named and hidden by the panel's ``organize`` transformation.
    """
    style_axes(ax, panel["title"])
    ax.axis("off")
    organize = next((t["options"] for t in panel.get("transformations", [])
                     if t["id"] == "organize"), {})
    names, hidden = organize.get("renameByName", {}), organize.get("excludeByName", {})
    single = len(panel["targets"]) == 1
    rows: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    for target in panel["targets"]:
        value = "Value" if single else f"Value #{target['refId']}"
        for item in prom.query(expand(target["expr"], seconds)):
            key = tuple(sorted((k, v) for k, v in item["metric"].items() if k != "__name__"))
            rows.setdefault(key, {})[value] = float(item["value"][1])
    labels = sorted({k for key in rows for k, _ in key}, key=lambda k: list(names).index(k)
                    if k in names else len(names))
    values = [v for v in (["Value"] if single else [f"Value #{t['refId']}"
                                                    for t in panel["targets"]])
              if not hidden.get(v)]
    ordered = sorted(rows.items(), key=lambda kv: -kv[1].get(values[0], 0.0) if values else 0)
    cells = [[dict(key).get(k, "") for k in labels] + [_cell(names.get(v, v), r.get(v))
                                                        for v in values]
             for key, r in ordered]
    header = [names.get(c, c) for c in (*labels, *values)]
    table = ax.table(cellText=cells or [["No data"] + [""] * (len(header) - 1)],
                     colLabels=header, loc="upper center", cellLoc="left", colLoc="left",
                     bbox=[0, 0.15, 1, 0.8])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    for cell in table.get_celld().values():
        cell.set_facecolor(_PANEL)
        cell.set_edgecolor(_GRID)
        cell.get_text().set_color(_TEXT)


def _cell(column: str, value: float | None) -> str:
    """Format a value cell: a share (its column says so) as a percentage, else an integer."""
    if value is None:
        return ""
    return f"{100 * value:.1f}%" if "Share" in column else f"{value:.0f}"


def collect_series(prom: PrometheusServer, panel: dict[str, Any], start: float,
                   end: float) -> list[tuple[str, Any]]:
    """Return (legend, values) for every series of every target of a time-series panel."""
    series = []
    for target in panel.get("targets", []):
        for item in range_query(prom, expand(target["expr"], int(end - start)), start, end):
            series.append((legend(target.get("legendFormat"), item["metric"]), item["values"]))
    return series


def render(prom: PrometheusServer, start: float, end: float, out: Path) -> None:
    """Draw every panel at its gridPos (24 columns) and save the figure to ``out``."""
    dashboard = load_dashboard()
    panels = list(iter_panels(dashboard["panels"]))
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(22, height * 0.5), facecolor=_BG)
    grid = fig.add_gridspec(height, 24, hspace=0.6, wspace=2.2, left=0.03, right=0.99,
                            top=0.96, bottom=0.01)
    fig.suptitle(f"{dashboard['title']}: every panel's query over {int(end - start)} s of "
                 "otel-loopguard demo, evaluated by Prometheus and drawn with matplotlib (not a "
                 "Grafana screenshot)", color=_TEXT, fontsize=14, x=0.03, ha="left")
    for panel in panels:
        pos = panel["gridPos"]
        rows = slice(pos["y"], pos["y"] + (pos["h"] if panel["type"] == "row" else pos["h"] - 2))
        ax = fig.add_subplot(grid[rows, pos["x"]:pos["x"] + pos["w"]])
        if panel["type"] == "row":
            ax.axis("off")
            ax.text(0, 0.2, panel["title"], color=_TEXT, fontsize=13, weight="bold")
        elif panel["type"] == "table":
            draw_table(ax, panel, prom, int(end - start))
        else:
            draw_timeseries(ax, panel, collect_series(prom, panel, start, end))
    out.parent.mkdir(parents=True, exist_ok=True)
    # The panels drawn, in the image itself: tests/test_dashboards.py compares them with the
    # dashboard, so a dashboard changed without a new picture fails.
    fig.savefig(out, dpi=80, facecolor=_BG,
                metadata={PANELS_KEY: json.dumps(panel_list(dashboard))})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the demo against Prometheus for ``--seconds`` and write the picture."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="data to collect (60)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "dashboard.png")
    args = parser.parse_args(argv)
    demo_seconds = args.seconds + WARMUP_SECONDS + 30
    with running_demo(demo_seconds) as target, running_prometheus([target], [ALERTS]) as prom:
        prom.wait_for('up{job="loopguard"} == 1', timeout=30)
        time.sleep(WARMUP_SECONDS)
        start = time.time()
        print(f"collecting {args.seconds:g} s of demo metrics in {prom.url} ...", file=sys.stderr)
        time.sleep(args.seconds)
        render(prom, start, time.time(), args.out)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
