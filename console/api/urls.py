"""``/api/v1/`` routes."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from console.api import (
    alerts,
    audit,
    cluster,
    dlq,
    groups,
    jobs,
    jobs_schedule,
    messages,
    preferences,
    spark_jobs,
    topics,
    users,
)

urlpatterns = [
    path("cluster/brokers/", cluster.ClusterBrokersView.as_view(), name="cluster-brokers"),
    path("topics/", topics.TopicListView.as_view(), name="topic-list"),
    path("topics/<str:name>/", topics.TopicDetailView.as_view(), name="topic-detail"),
    path("topics/<str:name>/route/", topics.TopicRouteView.as_view(), name="topic-route"),
    path("topics/<str:name>/stats/", topics.TopicStatsView.as_view(), name="topic-stats"),
    path("topics/<str:name>/messages/", topics.TopicMessagesView.as_view(), name="topic-messages"),
    path("messages/", messages.MessageSearchView.as_view(), name="message-search"),
    path("messages/<str:msg_id>/", messages.MessageDetailView.as_view(), name="message-detail"),
    path("messages/<str:msg_id>/consumption/", messages.MessageConsumptionView.as_view(),
         name="message-consumption"),
    path("consumer-groups/", groups.ConsumerGroupListView.as_view(), name="group-list"),
    path("consumer-groups/<str:group>/", groups.ConsumerGroupView.as_view(), name="group-detail"),
    path("consumer-groups/<str:group>/receive/", groups.ReceiveView.as_view(), name="group-receive"),
    path("consumer-groups/<str:group>/ack/", groups.AckView.as_view(), name="group-ack"),
    path("consumer-groups/<str:group>/nack/", groups.NackView.as_view(), name="group-nack"),
    path("consumer-groups/<str:group>/reset-offset/", groups.ResetOffsetView.as_view(), name="group-reset-offset"),
    path("dlq/", dlq.DeadLetterQueueListView.as_view(), name="dlq-list"),
    path("dlq/<str:group>/messages/", dlq.DeadLetterListView.as_view(), name="dlq-messages"),
    path("dlq/<str:group>/resend/", dlq.DeadLetterResendView.as_view(), name="dlq-resend"),
    path("jobs/<str:job_id>/", jobs.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<str:job_id>/retry/", jobs.JobRetryView.as_view(), name="job-retry"),
    path("audit/", audit.AuditListView.as_view(), name="audit-list"),
    path("me/preferences/", preferences.PreferencesView.as_view(), name="me-preferences"),
    path("users/", users.UserListView.as_view(), name="user-list"),
    path("users/<str:username>/", users.UserDetailView.as_view(), name="user-detail"),
    path("users/<str:username>/token/", users.UserTokenView.as_view(), name="user-token"),
    path("alert-rules/", alerts.AlertRuleListView.as_view(), name="alert-rule-list"),
    path("alert-rules/<int:rule_id>/", alerts.AlertRuleDetailView.as_view(), name="alert-rule-detail"),
    path("alert-rules/<int:rule_id>/silence/", alerts.AlertRuleSilenceView.as_view(), name="alert-rule-silence"),
    path("alerts/", alerts.AlertListView.as_view(), name="alert-list"),
    path("alerts/<int:alert_id>/resolve/", alerts.AlertResolveView.as_view(), name="alert-resolve"),
    path("scheduled-jobs/", jobs_schedule.ScheduledJobListView.as_view(), name="scheduled-job-list"),
    path("scheduled-jobs/<str:name>/", jobs_schedule.ScheduledJobView.as_view(), name="scheduled-job-detail"),
    path("scheduled-jobs/<str:name>/runs/", jobs_schedule.ScheduledJobRunsView.as_view(), name="scheduled-job-runs"),
    path("scheduled-jobs/<str:name>/run/", jobs_schedule.ScheduledJobRunNowView.as_view(), name="scheduled-job-run"),
    path("search-jobs/", spark_jobs.SearchJobListView.as_view(), name="search-job-list"),
    path("search-jobs/<str:job_id>/", spark_jobs.SearchJobView.as_view(), name="search-job-detail"),
    path("search-jobs/<str:job_id>/results/", spark_jobs.SearchJobResultsView.as_view(), name="search-job-results"),
    path("search-jobs/<str:job_id>/export.<str:fmt>", spark_jobs.SearchJobExportView.as_view(),
         name="search-job-export"),
    path("search-jobs/<str:job_id>/cancel/", spark_jobs.SearchJobCancelView.as_view(), name="search-job-cancel"),
    path("trace-jobs/", spark_jobs.TraceJobListView.as_view(), name="trace-job-list"),
    path("trace-jobs/<str:job_id>/", spark_jobs.TraceJobView.as_view(), name="trace-job-detail"),
    path("trace-jobs/<str:job_id>/results/", spark_jobs.TraceJobResultsView.as_view(), name="trace-job-results"),
    path("trace-jobs/<str:job_id>/cancel/", spark_jobs.TraceJobCancelView.as_view(), name="trace-job-cancel"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI served from drf-spectacular-sidecar (works offline); the split view loads its init script from
    # ``?script=`` instead of inline, so the Content-Security-Policy needs no 'unsafe-inline'
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="console/api_docs.html"),
         name="docs"),
]
