"""Dead letters: the groups that have any (count, newest), a group's dead letters with resend of a selection
(operator+, per-message results), "resend everything shown" as a background job (run by a Celery worker), and
JSON lines / CSV exports of a selection or of every dead letter. The job page follows a job's progress and
per-message outcomes, and offers a retry for a failed job, a done one with failed dead letters, or one whose
worker stopped."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from console.jobs.resend import retry_job, start_resend_job
from console.jobs.selectors import get_job, job_json
from console.models import Job
from console.roles import OPERATOR, VIEWER, has_role
from console.selectors.dlq import list_dlqs
from console.selectors.messages import OFFSET_MSG_ID
from console.selectors.ui_dlq import EXPORT_LIMIT, as_csv, as_json_lines, export_rows
from console.selectors.ui_messages import dead_letter_rows
from console.services.messages import resend_dead_letters
from console.views.base import error_page, invalid_group_page, page
from console.views.forms import GroupForm

LIMIT = 200
EXPORT_FORMATS = {"jsonl": "application/x-ndjson; charset=utf-8", "csv": "text/csv; charset=utf-8"}


def _selected(request: HttpRequest) -> list[str]:
    data = request.POST if request.method == "POST" else request.GET
    return list(dict.fromkeys(i.upper() for i in data.getlist("offset_msg_id") if OFFSET_MSG_ID.match(i)))



@page(VIEWER)
@require_http_methods(["GET"])
def dlq_index(request: HttpRequest) -> HttpResponse:
    form = GroupForm(request.GET or None)
    if form.is_bound and form.is_valid():
        return redirect("dlq-page", group=form.cleaned_data["group"])
    search = request.GET.get("search", "").strip()[:255]
    return render(request, "console/dlq.html", {"form": form, "group": None, "dlqs": list_dlqs(search),
                                                "search": search}, status=400 if form.is_bound else 200)


@page(VIEWER)
@require_http_methods(["GET", "POST"])
def dlq_group(request: HttpRequest, group: str) -> HttpResponse:
    if (bad := invalid_group_page(request, group)) is not None:
        return bad
    results = None
    status = 200
    if request.method == "POST":
        if not has_role(request.user, OPERATOR):
            return render(request, "console/forbidden.html", {"required": OPERATOR}, status=403)
        ids = _selected(request)
        if ids:
            results = resend_dead_letters(request.user, group, ids, None, force=request.POST.get("force") == "on")
        else:
            status = 400
    rows, truncated = dead_letter_rows(group, LIMIT)
    return render(request, "console/dlq.html", {
        "form": GroupForm({"group": group}), "group": group, "rows": rows, "truncated": truncated, "limit": LIMIT,
        "results": results, "nothing_selected": status == 400, "export_limit": EXPORT_LIMIT,
    }, status=status)


@page(OPERATOR)
@require_POST
def dlq_resend_all(request: HttpRequest, group: str) -> HttpResponse:
    """Resend every dead letter the page showed (their ids come with the form) as a background job."""
    if (bad := invalid_group_page(request, group)) is not None:
        return bad
    ids = _selected(request)
    if not ids:
        return error_page(request, 400, "nothing_to_resend", "The page showed no dead letter to resend.")
    job = start_resend_job(request.user, group, ids, None, force=request.POST.get("force") == "on")
    return redirect("job-page", job_id=job.pk)


@page(VIEWER)
@require_http_methods(["GET"])
def dlq_export(request: HttpRequest, group: str, fmt: str) -> HttpResponse:
    """``?offset_msg_id=...`` (repeated): those dead letters; none: every one (up to the export limit; the
    ``X-Export-Truncated`` header says when that cut the file). Bodies only for operators and admins."""
    if (bad := invalid_group_page(request, group)) is not None:
        return bad
    if fmt not in EXPORT_FORMATS:
        return error_page(request, 404, "not_found", f"no export format {fmt}")
    ids = _selected(request) if request.GET.get("scope") == "selected" else None
    if ids == []:
        return error_page(request, 400, "nothing_selected", "Select at least one dead letter to export.")
    with_body = has_role(request.user, OPERATOR)
    rows, truncated = export_rows(group, ids, with_body)
    content = "".join(as_json_lines(rows)) if fmt == "jsonl" else as_csv(rows, with_body)
    response = HttpResponse(content, content_type=EXPORT_FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="dlq-{group}.{fmt}"'
    response["X-Export-Count"] = str(len(rows))
    response["X-Export-Truncated"] = "true" if truncated else "false"
    return response


@page(VIEWER)
@require_http_methods(["GET"])
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = job_json(get_job(job_id))
    running = job["status"] in (Job.PENDING, Job.RUNNING) and not job["stale"]
    results = job["result"].get("results", []) if isinstance(job["result"], dict) else []
    percent = int(100 * job["progress"] / job["total"]) if job["total"] else 100
    return render(request, "console/job.html", {
        "job": job, "running": running, "results": results, "percent": percent,
        "ok_count": sum(1 for r in results if r.get("ok")), "failed_count": sum(1 for r in results if not r.get("ok")),
        "already_count": sum(1 for r in results if r.get("already_resent")),
        "error": job["result"].get("error") if isinstance(job["result"], dict) else None,
        "can_retry": job["retryable"] and has_role(request.user, OPERATOR),
    })


@page(OPERATOR)
@require_POST
def job_retry(request: HttpRequest, job_id: str) -> HttpResponse:
    """Queue a resend job again (see :func:`console.jobs.resend.retry_job`) and show it."""
    job = retry_job(request.user, get_job(job_id))
    return redirect("job-page", job_id=job.pk)
