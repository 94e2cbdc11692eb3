"""Scheduled jobs pages: the list (schedule, enabled, last runs, last failure, "run now"), one job's run
history with the schedule form, and the two POST actions (operator). The logic is in
:mod:`console.selectors.monitoring` and :mod:`console.services.schedules`."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.monitoring.models import JobRun
from console.roles import OPERATOR, VIEWER, has_role
from console.selectors.monitoring import headline, job_runs, scheduled_job, scheduled_jobs
from console.services.schedules import MAX_EVERY, PERIODS, run_now, update_schedule
from console.views.base import page


class ScheduleForm(forms.Form):
    every = forms.IntegerField(min_value=1, max_value=MAX_EVERY, label="Every")
    period = forms.ChoiceField(choices=[(p, p) for p in PERIODS], label="Period")
    enabled = forms.BooleanField(required=False, label="Enabled")


def _with_headlines(runs: list[dict]) -> list[dict]:
    return [{**r, "headline": headline(r["counts"])} for r in runs]


@page(VIEWER)
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = [{**j, "last_runs": _with_headlines(j["last_runs"])} for j in scheduled_jobs()]
    return render(request, "console/jobs.html", {"jobs": jobs, "can_run": has_role(request.user, OPERATOR)})


@page(VIEWER)
def job_detail(request: HttpRequest, name: str) -> HttpResponse:
    job = scheduled_job(name)
    outcome = request.GET.get("outcome", "")
    outcome = outcome if outcome in dict(JobRun.OUTCOMES) else ""
    runs = _with_headlines(job_runs(name, outcome=outcome or None, limit=200))
    sched = job["schedule"]
    form = ScheduleForm(initial={"every": sched["every"] or 60, "period": sched["period"] or PERIODS[0],
                                 "enabled": job["enabled"]})
    return render(request, "console/jobs_detail.html", {
        "job": job, "runs": runs, "outcome": outcome, "outcomes": [o for o, _ in JobRun.OUTCOMES], "form": form,
        "can_run": has_role(request.user, OPERATOR)})


@require_POST
@page(OPERATOR)
def job_run_now(request: HttpRequest, name: str) -> HttpResponse:
    sent = run_now(request.user, name)
    messages.success(request, f"Sent {sent['task']} to the workers (task {sent['task_id']}); its runs appear "
                              "below when a worker has run it.")
    if request.POST.get("next") == "list":
        return redirect("scheduled-job-list-page")
    return redirect("scheduled-job-page", name)


@require_POST
@page(OPERATOR)
def job_schedule(request: HttpRequest, name: str) -> HttpResponse:
    form = ScheduleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Schedule not changed: " + "; ".join(
            f"{field}: {' '.join(errs)}" for field, errs in form.errors.items()))
        return redirect("scheduled-job-page", name)
    update_schedule(request.user, name, every=form.cleaned_data["every"], period=form.cleaned_data["period"],
                    enabled=form.cleaned_data["enabled"])
    messages.success(request, "Schedule saved; beat picks it up within a few seconds.")
    return redirect("scheduled-job-page", name)
