"""The must-show browser test of the Search page, with every part real: the console (``manage.py runserver``) and a
``celery worker -Q spark`` (solo pool, its own local SparkSession) on one SQLite file, a real redis-server, the
e2e suite's broker, and headless Chromium. Chromium runs a search from the page; the job goes through Celery to
the Spark worker; the page's progress bar (fed by ``progress.js`` polling the REST state) reaches 100% and the
page shows the results by itself; a result opens the message's page.

The worker builds its SparkSession on the first job (about 10 s on this machine): one job in this module.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser

from broker_core.client import AdminClient, Message, Producer
from tests.conftest import ROOT
from tests.e2e.conftest import log_in, shot
from tests.integration.cluster import Cluster, free_port, http_up, stop_process, wait_until
from tests.workers.conftest import celery_worker, manage, worker_env
from workers.celery import app

pytestmark = pytest.mark.integration
PASSWORD = "search-page-pw"


@pytest.fixture(scope="module")
def console_url(tmp_path_factory: pytest.TempPathFactory, redis_url: str,
                cluster: Cluster) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("search-stack")
    env = {**worker_env(redis_url, cluster.namesrv, tmp / "console.sqlite3"), "DJANGO_SUPERUSER_USERNAME": "admin",
           "DJANGO_SUPERUSER_PASSWORD": PASSWORD, "DEBUG": "true", "SPARK_RESULTS_URI": str(tmp / "results"),
           "SPARK_MASTER": "local[2]", "SPARK_CONF_UI": "spark.ui.enabled=false",
           "SPARK_CONF_PARTITIONS": "spark.sql.shuffle.partitions=2", "SPARK_DRIVER_MEMORY": "1g"}
    manage(env, "migrate", "--noinput")
    manage(env, "ensure_admin")
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    port, hostname = free_port(), f"spark-{tmp.name}@localhost"
    with celery_worker(env, tmp / "worker.log", hostname, app, queues="spark"):
        web = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                               cwd=ROOT, env=env, stdout=open(tmp / "web.log", "ab"), stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: http_up(f"{url}/login/"), timeout=120, what="the console to answer")
            yield url
        finally:
            stop_process(web)


def test_search_from_the_page_progress_to_100_and_open_a_result(
        console_url: str, browser: Browser, sdk_admin: AdminClient, sdk_producer: Producer,
        unique: Callable[[str], str]) -> None:
    topic = unique("SearchPage")
    sdk_admin.create_topic(topic, 2, 2)
    wait_until(lambda: topic in sdk_admin.topic_list(), timeout=30, what="the topic's route")
    needle = unique("needle")
    planted = set()
    for i in range(300):
        body = f"order {i} {needle if i % 50 == 7 else 'nothing'} " + "p" * 300
        sent = sdk_producer.send(Message(topic, body.encode(), keys=f"k{i}", tags="t"))
        if i % 50 == 7:
            planted.add(sent.offset_msg_id)

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        log_in(page, console_url, "admin", PASSWORD)
        page.get_by_role("link", name="Search", exact=True).click()
        page.get_by_label("Topics").fill(topic)
        page.get_by_label("Body", exact=True).fill(needle)
        shot(page, "search-form")
        page.get_by_role("button", name="Start search").click()
        page.wait_for_url(f"{console_url}/search/jobs/*/")
        assert page.get_by_test_id("job-progress-bar").is_visible()
        seen: list[str] = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # the page updates itself (progress.js), then reloads when done
            if page.get_by_test_id("search-results").count():
                break
            seen.append(page.get_by_test_id("job-percent").inner_text())
            time.sleep(0.2)
        page.get_by_test_id("search-results").wait_for()
        assert page.get_by_test_id("job-status").inner_text() == "done", seen
        assert page.get_by_test_id("job-progress-bar").get_attribute("value") == "100"
        assert page.get_by_test_id("job-percent").inner_text() == "100%"
        assert page.get_by_test_id("search-counts").inner_text() == f"{len(planted)} matched of 300 scanned"
        links = page.get_by_test_id("result-link")
        assert {links.nth(i).inner_text() for i in range(links.count())} == planted
        shot(page, "search-results")
        first = links.nth(0).inner_text()
        links.nth(0).click()
        page.wait_for_url(f"{console_url}/messages/{first}/")
        assert needle in page.content()
        assert page.get_by_test_id("trace-link").is_visible()
        shot(page, "search-result-message")
    finally:
        context.close()
