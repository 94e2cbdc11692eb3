"""The dashboard's inline-SVG charts from hand-made samples: scaling, bucketing, ranges, the disk threshold
line, the empty state, and escaping of series names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from console.monitoring.models import BrokerSample, LagSample, TopicSample
from console.selectors import monitoring_charts as charts

pytestmark = pytest.mark.integration
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_line_chart_scales_buckets_and_marks_the_threshold():
    since = NOW - timedelta(hours=1)
    series = {"b": [(since + timedelta(seconds=15), 10.0), (since + timedelta(seconds=20), 30.0),
                    (NOW, 50.0)], "empty": [], "old": [(since - timedelta(seconds=1), 99.0)]}
    chart = charts.line_chart("Disk", "%", "chart-disk", series, since, NOW, y_max=100, threshold=90)
    [line] = chart.lines  # series with no point in range are left out
    # the first two fall in bucket 0 (30 s wide) -> their average 20 at its centre; the last in bucket 119
    top, bottom = charts.TOP, charts.HEIGHT - charts.BOTTOM
    left, right = charts.LEFT, charts.WIDTH - charts.RIGHT
    first, last = line.points.split()
    assert first == f"{round(left + (right - left) * 15 / 3600, 1)},{round(top + (bottom - top) * 0.8, 1)}"
    assert last.split(",")[1] == str(round(top + (bottom - top) * 0.5, 1))
    assert line.last == 50.0 and line.dot is None
    assert chart.threshold == (round(top + (bottom - top) * 0.1, 1), "90")
    assert [label for _, label in chart.y_ticks] == ["0", "50", "100"]
    auto = charts.line_chart("Rates", "msg/s", "r", {"x": [(NOW, 7.3)]}, since, NOW)
    assert auto.y_ticks[-1][1] == "10" and auto.lines[0].dot is not None
    assert charts.line_chart("Rates", "msg/s", "r", {}, since, NOW).empty


def _viewer() -> Client:
    user = User.objects.create_user("chart-viewer", password="pw")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return client


def test_dashboard_draws_rates_topics_and_disk_for_the_chosen_range(db: None):
    now = timezone.now()
    for minutes, put, ratio in ((50, 10.0, 0.4), (20, 30.0, 0.6), (1, 20.0, 0.93)):
        BrokerSample.objects.create(timestamp=now - timedelta(minutes=minutes), broker="broker-a", put_tps=put,
                                    get_tps=put / 2, disk_ratio=ratio)
    BrokerSample.objects.create(timestamp=now - timedelta(hours=5), broker="broker-old", put_tps=1, disk_ratio=0.1)
    TopicSample.objects.create(timestamp=now - timedelta(minutes=2), topic="<b>Orders</b>", put_tps=5.0)
    TopicSample.objects.create(timestamp=now - timedelta(minutes=2), topic="Idle", put_tps=0.0)

    page = _viewer().get("/").content.decode()
    rates = page.split('data-testid="chart-rates"')[1].split("</figure>")[0]
    assert rates.count("<polyline") == 2 and 'data-series="put"' in rates and 'data-series="get"' in rates
    topics = page.split('data-testid="chart-topics"')[1].split("</figure>")[0]
    assert "&lt;b&gt;Orders&lt;/b&gt;" in topics and "<b>Orders" not in topics and "Idle" not in topics
    disk = page.split('data-testid="chart-disk"')[1].split("</figure>")[0]
    assert 'data-series="broker-a"' in disk and "broker-old" not in disk and 'stroke-dasharray' in disk
    assert 'data-testid="disk-banner"' in page  # the newest broker sample is past 90 %

    day = _viewer_get(page_range="24h")
    assert 'data-series="broker-old"' in day.split('data-testid="chart-disk"')[1].split("</figure>")[0]


def _viewer_get(page_range: str) -> str:
    client = Client()
    client.force_login(User.objects.get(username="chart-viewer"))
    return client.get(f"/?range={page_range}").content.decode()


def test_dashboard_without_samples_says_so(db: None):
    page = _viewer().get("/?range=bogus").content.decode()
    assert 'data-testid="chart-rates-empty"' in page and 'aria-current="page">last 1h' in page


def test_group_page_charts_its_sampled_lag_per_topic(db: None, topic: str):
    now = timezone.now()
    for minutes, lag in ((30, 5), (10, 12)):
        LagSample.objects.create(timestamp=now - timedelta(minutes=minutes), group="charted-group", topic=topic,
                                 lag=lag, lag_seconds=3.0)
    page = _viewer().get("/groups/charted-group/").content.decode()
    chart = page.split('data-testid="chart-lag"')[1].split("</figure>")[0]
    assert f'data-series="{topic}"' in chart and "<polyline" in chart and "12" in chart
