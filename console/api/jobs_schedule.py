"""Scheduled jobs (the Celery beat entries): list with schedule and last runs, one job, its run history, change
its interval / enabled flag, and run it now.

- ``GET /scheduled-jobs/`` (viewer), ``GET/PATCH /scheduled-jobs/{name}/`` (viewer / operator),
- ``GET /scheduled-jobs/{name}/runs/?broker=&outcome=&limit=`` (viewer),
- ``POST /scheduled-jobs/{name}/run/`` (operator): 202 with the Celery task id.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, validated
from console.monitoring.models import JobRun
from console.roles import OPERATOR, VIEWER
from console.selectors.monitoring import job_runs, scheduled_job, scheduled_jobs
from console.services.schedules import MAX_EVERY, PERIODS, run_now, update_schedule


class ScheduleUpdateSerializer(serializers.Serializer):
    every = serializers.IntegerField(required=False, min_value=1, max_value=MAX_EVERY)
    period = serializers.ChoiceField(choices=PERIODS, required=False)
    enabled = serializers.BooleanField(required=False)


class RunsQuerySerializer(serializers.Serializer):
    broker = serializers.CharField(required=False, max_length=255)
    outcome = serializers.ChoiceField(choices=[o for o, _ in JobRun.OUTCOMES], required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=100)


class ScheduledJobListView(RoleAPIView):
    """``GET /scheduled-jobs/``: every scheduled job with schedule, enabled flag, its last 5 runs and last
    failure."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="scheduled_jobs_list")
    def get(self, request: Request) -> Response:
        rows = scheduled_jobs()
        return Response({"results": rows, "count": len(rows)})


class ScheduledJobView(RoleAPIView):
    """``GET /scheduled-jobs/{name}/``; ``PATCH`` with ``every`` / ``period`` / ``enabled`` (operator, audited)."""

    required_roles = {"GET": VIEWER, "PATCH": OPERATOR}

    @extend_schema(operation_id="scheduled_jobs_detail")
    def get(self, request: Request, name: str) -> Response:
        return Response(scheduled_job(name))

    @extend_schema(request=ScheduleUpdateSerializer)
    def patch(self, request: Request, name: str) -> Response:
        data = validated(ScheduleUpdateSerializer, request.data)
        update_schedule(request.user, name, every=data.get("every"), period=data.get("period"),
                        enabled=data.get("enabled"))
        return Response(scheduled_job(name))


class ScheduledJobRunsView(RoleAPIView):
    """``GET /scheduled-jobs/{name}/runs/``: the job's runs, newest first (every broker, or ``broker``)."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[RunsQuerySerializer])
    def get(self, request: Request, name: str) -> Response:
        q = validated(RunsQuerySerializer, request.query_params)
        rows = job_runs(name, broker=q.get("broker"), outcome=q.get("outcome"), limit=q["limit"])
        return Response({"results": rows, "count": len(rows)})


class ScheduledJobRunNowView(RoleAPIView):
    """``POST /scheduled-jobs/{name}/run/`` (operator): send the job's task to the workers now; 202 with
    ``task_id``. Its runs appear under ``.../runs/`` when a worker has run it."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=None)
    def post(self, request: Request, name: str) -> Response:
        return Response(run_now(request.user, name), status=status.HTTP_202_ACCEPTED)
