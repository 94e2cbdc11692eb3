"""Spark search and trace jobs (run by the ``spark`` Celery worker).

- ``POST /search-jobs/`` (operator): a search spec -> 202 with the pending job; a bad regex, JSON path or hex
  string is a 400. ``GET /search-jobs/{id}/`` (viewer): status, progress (stages, tasks, bytes, fraction) and
  counts. ``GET /search-jobs/{id}/results/?offset=&limit=`` (viewer; bodies for operators): paged rows with the
  broker and the record's coordinates. ``GET /search-jobs/{id}/export.jsonl`` / ``.csv`` (operator: bodies;
  streamed chunk by chunk from the spark worker).
  ``POST /search-jobs/{id}/cancel/`` (operator).
- ``POST /trace-jobs/`` (operator): ``msg_id`` or ``key`` (+ ``begin_ms`` / ``end_ms``); ``GET /trace-jobs/{id}/``,
  ``GET /trace-jobs/{id}/results/`` (viewer): the timeline and the per-group summary; ``POST .../cancel/``.
"""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from console.api.base import RoleAPIView, can_read_bodies, validated
from console.jobs import spark as service
from console.jobs.results import (
    export_response,
    get_spark_job,
    search_results,
    spark_job_json,
    trace_results,
)
from console.roles import OPERATOR, VIEWER

MAX_MS = (1 << 63) - 1


class _Times(serializers.Serializer):
    begin_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_MS)
    end_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_MS)
    brokers = serializers.ListField(child=serializers.CharField(max_length=255), required=False, max_length=64)


class SearchSpecSerializer(_Times):
    """Every given filter must hold (AND). Times are store times in ms since the epoch (inclusive)."""

    topics = serializers.ListField(child=serializers.CharField(max_length=255), required=False, max_length=256)
    key = serializers.CharField(required=False, allow_null=True, max_length=1024)
    tag = serializers.CharField(required=False, allow_null=True, max_length=1024)
    properties = serializers.DictField(child=serializers.CharField(max_length=4096, allow_blank=True),
                                       required=False)
    body_contains = serializers.CharField(required=False, allow_null=True, max_length=4096)
    body_contains_hex = serializers.CharField(required=False, allow_null=True, max_length=8192)
    body_regex = serializers.CharField(required=False, allow_null=True, max_length=4096)
    body_regex_bytes = serializers.CharField(required=False, allow_null=True, max_length=4096)
    json_path = serializers.CharField(required=False, allow_null=True, max_length=1024)
    json_equals = serializers.JSONField(required=False, allow_null=True)
    msg_id = serializers.CharField(required=False, allow_null=True, max_length=255)
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=1_000_000)


class TraceRequestSerializer(_Times):
    msg_id = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=255)
    key = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=1024)


class PageSerializer(serializers.Serializer):
    offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=10**9)
    limit = serializers.IntegerField(required=False, default=50, min_value=1, max_value=1000)


JOB = OpenApiResponse(OpenApiTypes.OBJECT, description="the job: status, progress, counts")


class SearchJobListView(RoleAPIView):
    """``POST /search-jobs/``: start a full-scan search over every broker (or ``brokers``)."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=SearchSpecSerializer, responses={202: JOB}, operation_id="search_jobs_create")
    def post(self, request: Request) -> Response:
        data = dict(validated(SearchSpecSerializer, request.data))
        brokers = data.pop("brokers", None)
        job = service.start_search(request.user, data, brokers)
        job.refresh_from_db()
        return Response(spark_job_json(job), status=status.HTTP_202_ACCEPTED)


class SearchJobView(RoleAPIView):
    """``GET /search-jobs/{id}/``: status, progress and counts."""

    required_roles = {"GET": VIEWER}

    @extend_schema(responses={200: JOB}, operation_id="search_jobs_detail")
    def get(self, request: Request, job_id: str) -> Response:
        return Response(spark_job_json(get_spark_job(job_id, service.SEARCH_KIND)))


class SearchJobResultsView(RoleAPIView):
    """``GET /search-jobs/{id}/results/?offset=&limit=``: a page of matches (409 until the job is done)."""

    required_roles = {"GET": VIEWER}

    @extend_schema(parameters=[PageSerializer], operation_id="search_jobs_results")
    def get(self, request: Request, job_id: str) -> Response:
        q = validated(PageSerializer, request.query_params)
        job = get_spark_job(job_id, service.SEARCH_KIND)
        return Response(search_results(job, q["offset"], q["limit"], can_read_bodies(request)))


class SearchJobExportView(RoleAPIView):
    """``GET /search-jobs/{id}/export.jsonl`` or ``export.csv``: every kept row, bodies included (operator)."""

    required_roles = {"GET": OPERATOR}

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
                   operation_id="search_jobs_export")
    def get(self, request: Request, job_id: str, fmt: str) -> StreamingHttpResponse:
        return export_response(get_spark_job(job_id, service.SEARCH_KIND), fmt)


class SearchJobCancelView(RoleAPIView):
    """``POST /search-jobs/{id}/cancel/``: stop a pending or running search (409 once it has ended)."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=None, responses={200: JOB}, operation_id="search_jobs_cancel")
    def post(self, request: Request, job_id: str) -> Response:
        job = service.cancel(request.user, get_spark_job(job_id, service.SEARCH_KIND))
        return Response(spark_job_json(job))


class TraceJobListView(RoleAPIView):
    """``POST /trace-jobs/``: start a full-scan trace of a message id (unique or offset id) or a key."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=TraceRequestSerializer, responses={202: JOB}, operation_id="trace_jobs_create")
    def post(self, request: Request) -> Response:
        d = validated(TraceRequestSerializer, request.data)
        job = service.start_trace(request.user, msg_id=d.get("msg_id"), key=d.get("key"),
                                  begin_ms=d.get("begin_ms"), end_ms=d.get("end_ms"), brokers=d.get("brokers"))
        job.refresh_from_db()
        return Response(spark_job_json(job), status=status.HTTP_202_ACCEPTED)


class TraceJobView(RoleAPIView):
    """``GET /trace-jobs/{id}/``: status, progress and counts."""

    required_roles = {"GET": VIEWER}

    @extend_schema(responses={200: JOB}, operation_id="trace_jobs_detail")
    def get(self, request: Request, job_id: str) -> Response:
        return Response(spark_job_json(get_spark_job(job_id, service.TRACE_KIND)))


class TraceJobResultsView(RoleAPIView):
    """``GET /trace-jobs/{id}/results/``: ``timeline`` (every step in time order with its broker, group, time,
    cost and record coordinates), ``groups`` (per group: deliveries, retries, dead letter, resends), ``ids``."""

    required_roles = {"GET": VIEWER}

    @extend_schema(operation_id="trace_jobs_results")
    def get(self, request: Request, job_id: str) -> Response:
        return Response(trace_results(get_spark_job(job_id, service.TRACE_KIND)))


class TraceJobCancelView(RoleAPIView):
    """``POST /trace-jobs/{id}/cancel/``."""

    required_roles = {"POST": OPERATOR}

    @extend_schema(request=None, responses={200: JOB}, operation_id="trace_jobs_cancel")
    def post(self, request: Request, job_id: str) -> Response:
        job = service.cancel(request.user, get_spark_job(job_id, service.TRACE_KIND))
        return Response(spark_job_json(job))
