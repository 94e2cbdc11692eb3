"""Browser check of the alerts page: an operator creates a lag rule with a webhook, the evaluation fires it (a
real local receiver gets the firing payload), the page shows it firing; silenced, resolved by hand behind a
confirmation (the receiver gets the resolution), shown in the history; the rule deleted behind a confirmation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import Page, expect

from console.alerts.models import Alert, AlertRule
from console.alerts.services import evaluate
from console.monitoring.models import LagSample
from tests.console.test_alerts import WebhookReceiver
from tests.e2e.conftest import shot

pytestmark = pytest.mark.integration


def test_alert_rule_lifecycle_in_the_browser(page: Page, base_url: str, login: Callable[[Page, User], None],
                                             make_user: Callable[[str], User], dialogs: list[str],
                                             settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the receiver is local (refused by default)
    hook = WebhookReceiver()
    try:
        login(page, make_user("operator"))
        page.get_by_role("navigation", name="main").get_by_role("link", name="Alerts").click()
        expect(page.get_by_role("heading", name="Alerts", exact=True)).to_be_visible()
        expect(page.get_by_test_id("firing-alerts")).to_contain_text("Nothing is firing.")

        page.get_by_text("New alert rule").click()
        form = page.get_by_test_id("create-rule")
        form.locator("[name=name]").fill("billing behind")
        form.locator("[name=kind]").select_option("group_lag_messages")
        form.locator("[name=target]").fill("billing")
        form.locator("[name=threshold]").fill("100")
        form.locator("[name=webhook_url]").fill(hook.url)
        form.get_by_role("button", name="Create rule").click()
        expect(page.locator(".flash")).to_contain_text("Alert rule billing behind created.")
        expect(page.get_by_test_id("rule-billing behind")).to_contain_text("ok")

        LagSample.objects.create(timestamp=timezone.now(), group="billing", topic="Orders", lag=250)
        assert evaluate().fired == 1
        assert hook.events() == [("firing", "billing/Orders")]
        page.reload()
        firing = page.get_by_test_id("firing-alerts")
        expect(firing).to_contain_text("billing/Orders")
        expect(firing).to_contain_text("250")
        expect(page.get_by_test_id("rule-billing behind")).to_contain_text("1 firing")
        shot(page, "30-alerts-firing")

        rule_row = page.get_by_test_id("rule-billing behind")
        rule_row.get_by_label("Silence billing behind for").select_option("60")
        rule_row.get_by_role("button", name="Silence").click()
        expect(page.get_by_test_id("rule-billing behind")).to_contain_text("silenced until")

        page.get_by_role("link", name="Resolve…").click()
        expect(page.get_by_role("heading")).to_contain_text("Resolve billing behind: billing/Orders?")
        page.get_by_role("button", name="Resolve alert").click()
        expect(page.get_by_test_id("firing-alerts")).to_contain_text("Nothing is firing.")
        expect(page.get_by_test_id("alert-history")).to_contain_text("billing/Orders")
        assert Alert.objects.get().state == Alert.RESOLVED
        assert len(hook.bodies) == 1  # silenced: the resolution is recorded, not sent
        shot(page, "31-alerts-history")

        page.get_by_test_id("rule-billing behind").get_by_role("link", name="Delete…").click()
        page.get_by_role("button", name="Delete rule").click()
        expect(page.locator(".flash")).to_contain_text("deleted")
        expect(page.get_by_test_id("alert-rules")).to_contain_text("No alert rules yet.")
        assert not AlertRule.objects.exists() and Alert.objects.count() == 1
        assert dialogs == []
    finally:
        hook.close()
