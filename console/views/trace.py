"""The "Message trace" pages: a message id or key is first answered at once from the broker's index
(:mod:`console.selectors.messages`); the full-scan trace (a Spark job over every broker's CommitLog and trace
events) is the second step. Its page shows the live progress, then the timeline per consumer group (deliveries,
retries with their delays, the dead letter, resends linking to the new message), each step with time and cost."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from broker_core.client import ClientError
from console.errors import ApiError
from console.jobs import spark as service
from console.jobs.results import get_spark_job, spark_job_json, trace_lanes, trace_results
from console.models import Job
from console.roles import OPERATOR, VIEWER, has_role
from console.selectors import messages as msg_selectors
from console.views.base import page
from console.views.forms import DateTimeLocalInput, LocalTimeLabels, _utc

INDEX_LIMIT = 20


class TraceForm(LocalTimeLabels, forms.Form):
    msg_id = forms.CharField(required=False, max_length=64, label="Message id",
                             help_text="unique id or offset id")
    topic = forms.CharField(required=False, max_length=127, label="Topic",
                            help_text="for the index: a unique id or a key is looked up in a topic")
    key = forms.CharField(required=False, max_length=255, label="Key")
    begin = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="Stored from (UTC)",
                                help_text="full scan only; empty: every retained segment")
    end = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="Stored to (UTC)")

    def clean_begin(self) -> Any:
        return _utc(self.cleaned_data.get("begin"))

    def clean_end(self) -> Any:
        return _utc(self.cleaned_data.get("end"))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["msg_id"] = (data.get("msg_id") or "").strip().upper()
        if not self.errors and not data["msg_id"] and not (data.get("key") or "").strip():
            raise forms.ValidationError("give a message id or a key")
        return data


def _index(d: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """What the broker's index answers at once, and a note when it cannot."""
    try:
        if d["msg_id"]:
            if d.get("topic"):
                return [msg_selectors.message_json(msg_selectors.message_by_unique_id(d["topic"], d["msg_id"]),
                                                   with_body=False)], None
            return [msg_selectors.message_json(msg_selectors.message_by_offset_id(d["msg_id"]), False)], None
        if not d.get("topic"):
            return [], "The key index is per topic: give the topic for an instant answer, or run the full scan."
        found, truncated = msg_selectors.messages_by_key(d["topic"], d["key"].strip(), INDEX_LIMIT)
        note = f"More than {INDEX_LIMIT} messages have this key; the newest are shown." if truncated else None
        return [msg_selectors.message_json(m, with_body=False) for m in found], note
    except ApiError as exc:
        return [], f"The index has no answer: {exc.detail}"
    except ClientError as exc:
        return [], f"The index has no answer: {exc}"


@page(VIEWER)
@require_http_methods(["GET", "POST"])
def trace(request: HttpRequest) -> HttpResponse:
    can_run = has_role(request.user, OPERATOR)
    if request.method == "POST":
        if not can_run:
            return render(request, "console/forbidden.html", {"required": OPERATOR}, status=403)
        form = TraceForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            job = service.start_trace(
                request.user, msg_id=d["msg_id"] or None, key=None if d["msg_id"] else d.get("key"),
                begin_ms=int(d["begin"].timestamp() * 1000) if d.get("begin") else None,
                end_ms=int(d["end"].timestamp() * 1000) if d.get("end") else None)
            return redirect("trace-job-page", job.pk)
    else:
        form = TraceForm(request.GET or None)
    context: dict[str, Any] = {"form": form, "can_run": can_run, "index": None, "index_note": None,
                               "jobs": list(Job.objects.filter(kind=service.TRACE_KIND).select_related("user")[:20])}
    if request.method == "GET" and form.is_bound and form.is_valid():
        context["index"], context["index_note"] = _index(form.cleaned_data)
        found = context["index"]
        if form.cleaned_data["msg_id"] and found and found[0].get("msg_id"):
            context["trace_id"] = found[0]["msg_id"]  # the unique id follows retries, DLQ and resends
        else:
            context["trace_id"] = form.cleaned_data["msg_id"]
    return render(request, "console/trace.html", context, status=400 if form.errors else 200)


@page(VIEWER)
@require_http_methods(["GET"])
def trace_job(request: HttpRequest, job_id: str) -> HttpResponse:
    job = get_spark_job(job_id, service.TRACE_KIND)
    context: dict[str, Any] = {"job": spark_job_json(job), "can_run": has_role(request.user, OPERATOR),
                               "lanes": None}
    if job.status == Job.DONE:
        try:
            result = trace_results(job)
        except ApiError as exc:  # read on a spark worker: none answering (or the file gone) leaves the job's facts
            context.update(results_error=str(exc.detail))
            return render(request, "console/trace_job.html", context, status=exc.status_code)
        context.update(lanes=trace_lanes(result), trace=result)
    return render(request, "console/trace_job.html", context)


@require_POST
@page(OPERATOR)
def trace_job_cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    service.cancel(request.user, get_spark_job(job_id, service.TRACE_KIND))
    return redirect("trace-job-page", job_id)
