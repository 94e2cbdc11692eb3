"""The "Search" pages: the full-scan search form (operator starts a Spark job), the job page with a live progress
bar (``static/console/progress.js`` polls ``GET /api/v1/search-jobs/{id}/``), a cancel button, and once done
the paged results with the scanned/matched counts and export links. The logic is in
:mod:`console.jobs.spark` and :mod:`console.jobs.results`."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from console.errors import ApiError
from console.jobs import spark as service
from console.jobs.results import export_response, get_spark_job, search_results, spark_job_json
from console.models import Job
from console.roles import OPERATOR, VIEWER, has_role
from console.selectors.messages import iso_ms
from console.views.base import page
from console.views.forms import DateTimeLocalInput, LocalTimeLabels, _utc

PAGE = 50
RECENT = 20


class SearchForm(LocalTimeLabels, forms.Form):
    """The page's search spec; every filled-in filter must hold."""

    topics = forms.CharField(required=False, max_length=4000, label="Topics",
                             help_text="comma or space separated; empty: every topic")
    begin = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="Stored from (UTC)")
    end = forms.DateTimeField(required=False, widget=DateTimeLocalInput(), label="Stored to (UTC)")
    key = forms.CharField(required=False, max_length=1024, label="Key")
    tag = forms.CharField(required=False, max_length=1024, label="Tag", help_text="'a || b' for either")
    properties = forms.CharField(required=False, max_length=4000, label="Properties",
                                 widget=forms.Textarea(attrs={"rows": 2}), help_text="NAME=VALUE, one a line")
    body = forms.CharField(required=False, max_length=4096, label="Body")
    body_mode = forms.ChoiceField(label="Body match", initial="contains", choices=[
        ("contains", "contains the text (UTF-8)"), ("contains_hex", "contains the bytes (hex)"),
        ("regex", "matches the regex (UTF-8 text)"), ("regex_bytes", "matches the bytes regex (latin-1)")])
    json_path = forms.CharField(required=False, max_length=1024, label="JSON path", help_text="e.g. $.order.id")
    json_value = forms.CharField(required=False, max_length=4096, label="JSON value",
                                 help_text="JSON (42, true, \"a\") or plain text for a string")
    limit = forms.IntegerField(required=False, min_value=1, max_value=1_000_000, label="Keep at most",
                               help_text="rows kept (counts stay exact); default 100000")

    def clean_begin(self) -> Any:
        return _utc(self.cleaned_data.get("begin"))

    def clean_end(self) -> Any:
        return _utc(self.cleaned_data.get("end"))

    def spec(self) -> dict[str, Any]:
        d = self.cleaned_data
        props: dict[str, str] = {}
        for line in (d.get("properties") or "").splitlines():
            if line.strip():
                name, sep, value = line.partition("=")
                if not sep or not name.strip():
                    raise ApiError(400, "invalid_spec", f"properties: {line.strip()!r} is not NAME=VALUE")
                props[name.strip()] = value.strip()
        spec: dict[str, Any] = {
            "topics": [t for t in (d.get("topics") or "").replace(",", " ").split() if t],
            "begin_ms": int(d["begin"].timestamp() * 1000) if d.get("begin") else None,
            "end_ms": int(d["end"].timestamp() * 1000) if d.get("end") else None,
            "key": d.get("key") or None, "tag": d.get("tag") or None, "properties": props,
            "limit": d.get("limit")}
        if d.get("body"):
            spec[{"contains": "body_contains", "contains_hex": "body_contains_hex", "regex": "body_regex",
                  "regex_bytes": "body_regex_bytes"}[d["body_mode"]]] = d["body"]
        if d.get("json_path"):
            spec["json_path"] = d["json_path"]
            raw = d.get("json_value") or ""
            try:
                spec["json_equals"] = json.loads(raw)
            except ValueError:
                spec["json_equals"] = raw
        return spec


def _recent(kind: str) -> list[Job]:
    return list(Job.objects.filter(kind=kind).select_related("user")[:RECENT])


@page(VIEWER)
@require_http_methods(["GET", "POST"])
def search(request: HttpRequest) -> HttpResponse:
    can_run = has_role(request.user, OPERATOR)
    form = SearchForm(request.POST if request.method == "POST" else None)
    error = None
    if request.method == "POST":
        if not can_run:
            return render(request, "console/forbidden.html", {"required": OPERATOR}, status=403)
        if form.is_valid():
            try:
                job = service.start_search(request.user, form.spec())
            except ApiError as exc:
                error = str(exc.detail)
            else:
                return redirect("search-job-page", job.pk)
    return render(request, "console/search.html", {
        "form": form, "error": error, "can_run": can_run, "jobs": _recent(service.SEARCH_KIND)},
        status=400 if (form.errors or error) else 200)


@page(VIEWER)
@require_http_methods(["GET"])
def search_job(request: HttpRequest, job_id: str) -> HttpResponse:
    job = get_spark_job(job_id, service.SEARCH_KIND)
    data = spark_job_json(job)
    context: dict[str, Any] = {"job": data, "can_run": has_role(request.user, OPERATOR), "results": None}
    if job.status == Job.DONE:
        try:
            offset = max(0, int(request.GET.get("offset", "0")))
        except ValueError:
            offset = 0
        try:
            res = search_results(job, offset, PAGE, has_role(request.user, OPERATOR))
        except ApiError as exc:  # read on a spark worker: none answering (or the files gone) leaves the job's facts
            context.update(results_error=str(exc.detail))
            return render(request, "console/search_job.html", context, status=exc.status_code)
        for row in res["results"]:
            row["stored"] = iso_ms(row.get("store_timestamp") or 0)
        context.update(results=res, prev_offset=max(0, offset - PAGE) if offset else None,
                       first=offset + 1 if res["results"] else 0, last=offset + len(res["results"]))
    return render(request, "console/search_job.html", context)


@require_POST
@page(OPERATOR)
def search_job_cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    service.cancel(request.user, get_spark_job(job_id, service.SEARCH_KIND))
    return redirect("search-job-page", job_id)


@page(OPERATOR)
@require_http_methods(["GET"])
def search_job_export(request: HttpRequest, job_id: str, fmt: str) -> StreamingHttpResponse:
    return export_response(get_spark_job(job_id, service.SEARCH_KIND), fmt)
