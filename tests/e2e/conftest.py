"""Browser tests: a real name server and broker (fast delay levels, so failing consumers dead-letter in about a
second), the console served by pytest-django's ``live_server`` and Debian's headless Chromium driven by Playwright.

Chromium is ``/usr/bin/chromium`` (``CHROMIUM`` overrides); the tests skip when it is missing. Screenshots of
each main page go to ``tests/e2e/artifacts/``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
os.environ.setdefault("DJANGO_DB_PATH", str(Path(tempfile.mkdtemp(prefix="console-db-")) / "console.sqlite3"))

import django

django.setup()

import pytest  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

from broker_core.client import AdminClient, Producer  # noqa: E402
from console import broker_client  # noqa: E402
from tests.integration.cluster import Cluster  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
PASSWORD = "correct-horse-battery"
# Delay levels of 100 ms steps: a consumer that always fails dead-letters within a second or two.
FAST = "messageDelayLevel=" + " ".join(f"{100 * (i + 1)}ms" for i in range(18)) + "\nscheduleDeliverIntervalMs=20\n"

_names = count()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and ``broker-a`` for the whole browser suite."""
    c = Cluster(tmp_path_factory.mktemp("e2e-cluster"))
    try:
        yield c.add_brokers_registered({"broker-a": FAST})
    finally:
        broker_client.reset()
        c.close()


@pytest.fixture(scope="session")
def sdk_admin(cluster: Cluster) -> Iterator[AdminClient]:
    """The test's own admin client, for arranging and checking state behind the console's back."""
    with AdminClient(cluster.namesrv) as admin:
        yield admin


@pytest.fixture(scope="session")
def sdk_producer(cluster: Cluster) -> Iterator[Producer]:
    p = Producer("e2e-producers", cluster.namesrv).start()
    yield p
    p.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per module: Playwright's sync API runs an event loop on the main thread while it
    is open, which would break later tests that call ``asyncio.run``."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    # Playwright's sync API keeps an event loop on this thread; Django would take the test's own ORM calls for
    # calls from async code. They are plain synchronous calls, so allow them.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    ARTIFACTS.mkdir(exist_ok=True)
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()
    finally:
        pw.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def base_url(live_server, settings, cluster: Cluster) -> str:  # type: ignore[no-untyped-def]
    """The live console's URL, pointed at the test cluster (``live_server`` gives a transactional database)."""
    settings.BROKER_CORE_NAMESRV = cluster.namesrv
    return str(live_server.url)


@pytest.fixture(autouse=True)
def _fresh_lists(settings) -> None:  # type: ignore[no-untyped-def]
    """The console checks its cache of the brokers' answers on every read (console.selectors.broker_cache), so
    its lists show what a test arranged behind its back at once."""
    settings.CONSOLE_BROKER_CACHE_S = 0


@pytest.fixture
def dialogs() -> list[str]:
    """Messages of every JavaScript dialog any page opened (there should be none)."""
    return []


@pytest.fixture
def page(browser: Browser, dialogs: list[str]) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(15_000)

    def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
        dialogs.append(dialog.message)
        dialog.dismiss()

    p.on("dialog", on_dialog)
    yield p
    context.close()


@pytest.fixture
def make_user(transactional_db: None) -> Callable[[str], User]:
    """``make_user("admin")`` -> a user in that role group (the flush between tests removes the groups that the
    data migration made, so they are created here)."""

    def make(role: str) -> User:
        user = User.objects.create_user(f"{role}-{next(_names)}", password=PASSWORD)
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def login(base_url: str) -> Callable[[Page, User], None]:
    def do(page: Page, user: User) -> None:
        log_in(page, base_url, user.get_username(), PASSWORD)

    return do


def log_in(page: Page, base_url: str, username: str, password: str) -> None:
    """Sign in through the login form of the console at ``base_url`` and land on the dashboard."""
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


@pytest.fixture
def unique() -> Callable[[str], str]:
    return lambda prefix: f"{prefix}-{os.getpid()}-{next(_names)}"


def shot(page: Page, name: str) -> None:
    """Save a full-page screenshot ``tests/e2e/artifacts/<name>.png``."""
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
