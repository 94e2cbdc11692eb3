"""Consumer group pages: the list (lag, online clients, how each group is known), a group's committed offsets
and lag per queue, and resetting its offsets on a topic (operator+) with a dry-run preview and a confirm step."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from broker_core.client import ClientError
from broker_core.protocol.validation import topic_error
from console.roles import OPERATOR, VIEWER
from console.selectors.groups import reset_preview
from console.selectors.topics import check_topic_name
from console.selectors.ui_groups import group_list_context, group_queues, reset_queue_rows, reset_target
from console.services.groups import reset_offset
from console.views.base import error_page, invalid_group_page, page
from console.views.forms import QUEUE_INPUT, GroupForm, ResetOffsetForm
from console.views.topics import page_href


@page(VIEWER)
@require_http_methods(["GET"])
def group_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("search", "").strip()[:255]
    try:
        page_no = int(request.GET.get("page", 1))
    except ValueError:
        page_no = 1
    context = group_list_context(search, page_no)
    group_href, dlq_href = page_href("group-page"), page_href("dlq-page")
    context["groups"] = [{**g, "href": group_href(g["group"]), "dlq_href": dlq_href(g["group"])}
                         for g in context["groups"]]
    return render(request, "console/group_list.html", context)


@page(VIEWER)
@require_http_methods(["GET"])
def group_open(request: HttpRequest) -> HttpResponse:
    """The list page's "open a group by name" form."""
    form = GroupForm(request.GET)
    if not form.is_valid():
        return error_page(request, 400, "invalid_group", " ".join(form.errors.get("group", [])))
    return redirect("group-page", group=form.cleaned_data["group"])


@page(VIEWER)
@require_http_methods(["GET"])
def group_detail(request: HttpRequest, group: str) -> HttpResponse:
    if (bad := invalid_group_page(request, group)) is not None:
        return bad
    topic = request.GET.get("topic", "").strip()
    data = group_queues(group, check_topic_name(topic) if topic else None)
    return render(request, "console/group_detail.html", {"group": group, "topic": topic, "stats": data})


def _queue_rows(group: str, topic: str, offsets: dict[tuple[str, int], int] | None = None) -> list[dict[str, Any]]:
    """The per-queue rows of the exact-offset inputs, or none when ``topic`` is not a valid, existing topic."""
    if not topic or topic_error(topic):
        return []
    try:
        return reset_queue_rows(group, topic, offsets)
    except ClientError:  # e.g. the topic does not exist: the form says so when it is submitted
        return []


@page(OPERATOR)
@require_http_methods(["GET", "POST"])
def group_reset(request: HttpRequest, group: str) -> HttpResponse:
    """GET: the form (with the topic's queues for exact offsets when ``?topic=`` names one). POST
    ``step=preview``: the dry run (per queue what is replayed or skipped) and a confirm form carrying the same
    target. POST ``step=apply`` with ``confirm``: the reset, and what it did."""
    if (bad := invalid_group_page(request, group)) is not None:
        return bad
    if request.method == "GET":
        topic = request.GET.get("topic", "").strip()
        form = ResetOffsetForm(initial={"topic": topic, "mode": "time",
                                        "timestamp": timezone.localtime().replace(microsecond=0, tzinfo=None)})
        return render(request, "console/group_reset.html",
                      {"group": group, "form": form, "queue_rows": _queue_rows(group, topic)})
    form = ResetOffsetForm(request.POST)
    if not form.is_valid():
        try:
            typed = form.queue_offsets()
        except ValueError:
            typed = {}
        rows = _queue_rows(group, str(request.POST.get("topic", "")).strip(), typed)
        return render(request, "console/group_reset.html", {"group": group, "form": form, "queue_rows": rows},
                      status=400)
    d = form.cleaned_data
    target = reset_target(d["mode"], d.get("timestamp"), d.get("offsets"))
    exact = [{"input": f"{QUEUE_INPUT}{b}:{q}", "value": o} for (b, q), o in sorted((d.get("offsets") or {}).items())]
    context = {"group": group, "form": form, "topic": d["topic"], "mode": d["mode"],
               "when": d.get("timestamp"), "exact": exact,
               "queue_rows": _queue_rows(group, d["topic"], d.get("offsets"))}
    step = request.POST.get("step", "preview")
    if step == "apply":
        if request.POST.get("confirm") != "yes":
            plan = reset_preview(group, d["topic"], target)
            return render(request, "console/group_reset.html",
                          {**context, "preview": plan, "confirm_error": True}, status=400)
        applied = reset_offset(request.user, group, d["topic"], target)
        messages.success(request, f"Offsets of {group} on {d['topic']} reset.")
        return render(request, "console/group_reset.html", {**context, "applied": applied})
    return render(request, "console/group_reset.html",
                  {**context, "preview": reset_preview(group, d["topic"], target)})
