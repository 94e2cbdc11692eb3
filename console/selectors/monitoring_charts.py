"""Charts of the sampled history, drawn as inline SVG by the server (no JavaScript, no assets: works offline).

:func:`line_chart` turns ``{series name: [(time, value)]}`` into what ``console/dashboard_chart.html`` draws:
each series averaged into at most :data:`BUCKETS` time buckets over the range, scaled into a fixed viewBox,
as an SVG ``points`` string, with y and x tick labels, an optional threshold line and each series' last value.
The dashboard shows total put/get rates, the busiest topics' put rates and disk use per broker; the group page
shows lag over time. Ranges: last hour, 24 hours, 7 days (hourly rows past the raw window are included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg
from django.utils import timezone

from console.monitoring.models import BrokerSample, LagSample, TopicSample

RANGES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
DEFAULT_RANGE = "1h"
BUCKETS = 120
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 200, 52, 12, 10, 24
# Series colours; static/console/console.css has the same list as .series-0 .. .series-7 for the legend swatches
# (the Content-Security-Policy allows no inline style attributes).
COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
TOP_TOPICS = 5


@dataclass
class Line:
    name: str
    color: str
    points: str
    last: float
    dot: tuple[float, float] | None = None  # a series with one point is drawn as a dot
    slot: int = 0  # index into COLORS: the legend's CSS class series-<slot>


@dataclass
class Chart:
    title: str
    unit: str
    testid: str
    lines: list[Line] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    threshold: tuple[float, str] | None = None
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    plot_bottom: int = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        return not self.lines


def range_key(value: str | None) -> str:
    return value if value in RANGES else DEFAULT_RANGE


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10 ** len(str(int(value))) / 10 if value >= 1 else 0.1
    for mult in (1, 2, 2.5, 5, 10):
        if value <= step * mult:
            return step * mult
    return value


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2g}"


def line_chart(title: str, unit: str, testid: str, series: dict[str, list[tuple[datetime, float]]],
               since: datetime, until: datetime, *, y_max: float | None = None,
               threshold: float | None = None) -> Chart:
    """See the module docstring. ``y_max`` fixes the scale (e.g. 100 for percentages)."""
    chart = Chart(title, unit, testid)
    span = (until - since).total_seconds()
    bucket = span / BUCKETS
    plot_w, plot_h = chart.plot_right - LEFT, chart.plot_bottom - TOP
    averaged: dict[str, list[tuple[float, float]]] = {}
    for name, points in series.items():
        sums: dict[int, list[float]] = {}
        for ts, value in points:
            if value is None or not since <= ts <= until:
                continue
            index = min(BUCKETS - 1, int((ts - since).total_seconds() // bucket))
            sums.setdefault(index, []).append(float(value))
        if sums:
            averaged[name] = [((i + 0.5) * bucket, sum(v) / len(v)) for i, v in sorted(sums.items())]
    top = y_max if y_max is not None else _nice_max(max((v for pts in averaged.values() for _, v in pts),
                                                         default=0.0))
    if threshold is not None and y_max is None:
        top = max(top, threshold)

    def y(value: float) -> float:
        return round(TOP + plot_h * (1 - min(value, top) / top), 1)

    for i, (name, pts) in enumerate(sorted(averaged.items())):
        xy = [(round(LEFT + plot_w * t / span, 1), y(v)) for t, v in pts]
        chart.lines.append(Line(name, COLORS[i % len(COLORS)], " ".join(f"{a},{b}" for a, b in xy),
                                round(pts[-1][1], 2), xy[0] if len(xy) == 1 else None, i % len(COLORS)))
    chart.y_ticks = [(y(top * f), _fmt(top * f)) for f in (0, 0.5, 1)]
    fmt = "%m-%d %H:%M" if span > 86400 else "%H:%M"
    chart.x_ticks = [(round(LEFT + plot_w * f, 1),
                      timezone.localtime(since + timedelta(seconds=span * f)).strftime(fmt))
                     for f in (0, 0.25, 0.5, 0.75, 1)]
    if threshold is not None:
        chart.threshold = (y(threshold), _fmt(threshold))
    return chart


def _window(range_name: str, now: datetime | None = None) -> tuple[datetime, datetime]:
    until = now or timezone.now()
    return until - RANGES[range_key(range_name)], until


def dashboard_charts(range_name: str, now: datetime | None = None) -> list[Chart]:
    """Message rates (all brokers), the busiest topics' put rates, disk use per broker."""
    since, until = _window(range_name, now)
    brokers = list(BrokerSample.objects.filter(timestamp__gte=since, timestamp__lte=until)
                   .values_list("timestamp", "broker", "put_tps", "get_tps", "disk_ratio"))
    put: dict[datetime, float] = {}
    get: dict[datetime, float] = {}
    disk: dict[str, list[tuple[datetime, float]]] = {}
    for ts, broker, p, g, ratio in brokers:
        put[ts] = put.get(ts, 0.0) + p
        get[ts] = get.get(ts, 0.0) + g
        if ratio is not None:
            disk.setdefault(broker, []).append((ts, ratio * 100))
    rates = {"put": sorted(put.items()), "get": sorted(get.items())} if brokers else {}
    topics_in_range = TopicSample.objects.filter(timestamp__gte=since, timestamp__lte=until)
    busiest = [t for t, avg in topics_in_range.values("topic").annotate(avg=Avg("put_tps")).order_by("-avg", "topic")
               .values_list("topic", "avg")[:TOP_TOPICS] if avg]
    per_topic: dict[str, list[tuple[datetime, float]]] = {t: [] for t in busiest}
    for ts, topic, p in topics_in_range.filter(topic__in=busiest).values_list("timestamp", "topic", "put_tps"):
        per_topic[topic].append((ts, p))
    return [
        line_chart("Message rates, all brokers", "msg/s", "chart-rates", rates, since, until),
        line_chart(f"Put rate of the {TOP_TOPICS} busiest topics", "msg/s", "chart-topics", per_topic, since, until),
        line_chart("Disk use per broker", "%", "chart-disk", disk, since, until, y_max=100, threshold=90),
    ]


def group_lag_chart(group: str, range_name: str, now: datetime | None = None) -> Chart:
    """``group``'s lag (messages) per topic over the range."""
    since, until = _window(range_name, now)
    series: dict[str, list[tuple[datetime, Any]]] = {}
    for ts, topic, lag in (LagSample.objects.filter(group=group, timestamp__gte=since, timestamp__lte=until)
                           .values_list("timestamp", "topic", "lag")):
        series.setdefault(topic, []).append((ts, lag))
    return line_chart("Lag over time", "messages", "chart-lag", series, since, until)
