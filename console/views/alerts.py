"""The alerts page: rules, firing alerts and history for everyone (viewer); operators and admins create, edit,
silence and delete rules and resolve alerts by hand (delete and resolve behind a confirmation page). Every change
goes through :mod:`console.alerts.rules`, which audits it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.validators import URLValidator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from console.alerts import rules as rule_services
from console.alerts import selectors
from console.alerts.models import Alert, AlertRule
from console.alerts.webhook_guard import validate_webhook_url
from console.errors import ApiError
from console.roles import OPERATOR, VIEWER
from console.views.base import page

HISTORY = 50
SILENCE_CHOICES = [(15, "15 minutes"), (60, "1 hour"), (240, "4 hours"), (1440, "1 day"), (10080, "1 week")]


class AlertRuleForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=AlertRule.KINDS)
    target = forms.CharField(max_length=255, initial="*",
                             help_text="group (lag, DLQ) or broker (disk, missing) name; globs like orders-*; * = all")
    threshold = forms.FloatField(initial=100, min_value=0,
                                 help_text="messages, seconds, dead letters, or a disk ratio 0..1; "
                                           "ignored for a missing broker")
    for_evaluations = forms.IntegerField(min_value=1, max_value=1440, initial=1, label="Fire after",
                                         help_text="consecutive evaluations (one a minute) the condition holds")
    window_minutes = forms.IntegerField(min_value=1, max_value=10080, initial=10, label="DLQ window (minutes)")
    emails = forms.CharField(required=False, max_length=5000, label="Email to",
                             help_text="comma or space separated addresses")
    webhook_url = forms.CharField(required=False, max_length=1000, label="Webhook URL",
                                  validators=[URLValidator(schemes=["http", "https"]), validate_webhook_url],
                                  help_text="public addresses only, unless allow-listed by the admin; "
                                            "redirects are not followed")
    repeat_minutes = forms.IntegerField(min_value=0, max_value=10080, initial=0, label="Repeat every (minutes)",
                                        help_text="0: one firing and one resolved notification")
    enabled = forms.BooleanField(required=False, initial=True)

    def clean_emails(self) -> list[str]:
        addresses = [a for a in self.cleaned_data.get("emails", "").replace(",", " ").split() if a]
        field = forms.EmailField()
        for a in addresses:
            try:
                field.clean(a)
            except forms.ValidationError:
                raise forms.ValidationError(f"{a!r} is not an email address") from None
        if len(addresses) > 50:
            raise forms.ValidationError("at most 50 addresses")
        return addresses

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("kind") == AlertRule.BROKER_MISSING:
            data["threshold"] = 1.0
        elif data.get("kind") and data.get("threshold") is not None:
            error = rule_services.check_threshold(data["kind"], data["threshold"])
            if error:
                self.add_error("threshold", error)
        return data


def _initial(rule: AlertRule) -> dict[str, Any]:
    return {**{f: getattr(rule, f) for f in selectors.RULE_FIELDS}, "emails": ", ".join(rule.emails)}


def _context(request: HttpRequest, form: AlertRuleForm | None = None) -> dict[str, Any]:
    show_webhooks = selectors.can_see_webhooks(request.user)
    return {"rules": selectors.list_rules(show_webhooks), "show_webhooks": show_webhooks,
            "open_alerts": selectors.alerts(Alert.FIRING, limit=200),
            "pending": selectors.alerts(Alert.PENDING, limit=200),
            "history": selectors.alerts(Alert.RESOLVED, limit=HISTORY), "form": form or AlertRuleForm(),
            "silence_choices": SILENCE_CHOICES}


@page(VIEWER)
@require_http_methods(["GET"])
def alert_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/alerts.html", _context(request))


@page(OPERATOR)
@require_POST
def alert_rule_create(request: HttpRequest) -> HttpResponse:
    form = AlertRuleForm(request.POST)
    if form.is_valid():
        try:
            rule = rule_services.create_rule(request.user, form.cleaned_data)
        except ApiError as exc:
            form.add_error("name", str(exc.detail))
        else:
            messages.success(request, f"Alert rule {rule['name']} created.")
            return redirect("alert-list-page")
    return render(request, "console/alerts.html", {**_context(request, form), "show_create": True}, status=400)


@page(OPERATOR)
@require_http_methods(["GET", "POST"])
def alert_rule_edit(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = selectors.get_rule(rule_id)
    if request.method == "POST":
        form = AlertRuleForm(request.POST)
        if form.is_valid():
            try:
                rule_services.update_rule(request.user, rule.pk, form.cleaned_data)
            except ApiError as exc:
                form.add_error("name", str(exc.detail))
            else:
                messages.success(request, f"Alert rule {form.cleaned_data['name']} saved.")
                return redirect("alert-list-page")
        return render(request, "console/alerts_rule_form.html", {"rule": rule, "form": form}, status=400)
    form = AlertRuleForm(initial=_initial(rule))
    return render(request, "console/alerts_rule_form.html", {"rule": rule, "form": form})


@page(OPERATOR)
@require_POST
def alert_rule_silence(request: HttpRequest, rule_id: int) -> HttpResponse:
    try:
        minutes = int(request.POST.get("minutes", ""))
    except ValueError:
        minutes = -1
    if minutes != 0 and minutes not in dict(SILENCE_CHOICES):
        messages.error(request, "Choose how long to silence the rule.")
        return redirect("alert-list-page")
    rule = rule_services.silence_rule(request.user, rule_id, minutes)
    messages.success(request, f"Alert rule {rule['name']} " + (
        f"silenced for {dict(SILENCE_CHOICES)[minutes]}." if minutes else "no longer silenced."))
    return redirect("alert-list-page")


@page(OPERATOR)
@require_http_methods(["GET", "POST"])
def alert_rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = selectors.get_rule(rule_id)
    if request.method == "POST":
        rule_services.delete_rule(request.user, rule.pk)
        messages.success(request, f"Alert rule {rule.name} deleted; its alert history is kept.")
        return redirect("alert-list-page")
    return render(request, "console/alerts_confirm.html", {
        "title": f"Delete alert rule {rule.name}?", "action": "Delete rule", "danger": True,
        "text": f"The rule stops being evaluated; its {rule.alerts.filter(state=Alert.FIRING).count()} firing "
                "alert(s) are closed without notifying anyone. Past alerts stay in the history."})


@page(OPERATOR)
@require_http_methods(["GET", "POST"])
def alert_resolve(request: HttpRequest, alert_id: int) -> HttpResponse:
    alert = selectors.get_alert(alert_id)
    if request.method == "POST":
        rule_services.resolve_alert(request.user, alert.pk)
        messages.success(request, f"Alert {alert.rule_name}: {alert.subject} resolved.")
        return redirect("alert-list-page")
    if alert.state == Alert.RESOLVED:
        messages.info(request, "That alert is resolved already.")
        return redirect("alert-list-page")
    return render(request, "console/alerts_confirm.html", {
        "title": f"Resolve {alert.rule_name}: {alert.subject}?", "action": "Resolve alert", "danger": False,
        "text": "The alert closes now and the rule's channels are told it is resolved. If the condition still "
                "holds, no new alert opens for this subject until it has cleared once."})
