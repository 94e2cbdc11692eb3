"""Root URLs: the HTML pages, the REST API under ``/api/v1/``, the health check and Django's admin."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from console.api.health import HealthView
from console.views import (
    acl,
    alerts,
    audit,
    broker_runtime,
    clients,
    cluster,
    dashboard,
    dlq,
    groups,
    jobs,
    messages,
    preferences,
    search,
    topics,
    trace,
    users,
)

pages = [
    path("", dashboard.dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("cluster/", cluster.cluster, name="cluster-page"),
    path("cluster/brokers/<str:addr>/runtime/", broker_runtime.broker_runtime_page, name="broker-runtime-page"),
    path("acl/", acl.acl_page, name="acl-page"),
    path("acl/accounts/", acl.acl_account_save, name="acl-account-save-page"),
    path("acl/accounts/delete/", acl.acl_account_delete, name="acl-account-delete-page"),
    path("acl/white/", acl.acl_white_save, name="acl-white-page"),
    path("cluster/switch-over/<str:broker_name>/<int:broker_id>/", cluster.switch_over, name="switch-over-page"),
    path("topics/", topics.topic_list, name="topic-list-page"),
    path("topics/new/", topics.topic_create, name="topic-create-page"),
    path("topics/<str:name>/", topics.topic_detail, name="topic-page"),
    path("topics/<str:name>/send/", topics.topic_send, name="topic-send-page"),
    path("topics/<str:name>/delete/", topics.topic_delete, name="topic-delete-page"),
    path("groups/", groups.group_list, name="group-list-page"),
    path("groups/open/", groups.group_open, name="group-open-page"),
    path("groups/<str:group>/", groups.group_detail, name="group-page"),
    path("groups/<str:group>/reset/", groups.group_reset, name="group-reset-page"),
    path("groups/<str:group>/clients/", clients.group_clients, name="group-clients-page"),
    path("messages/", messages.message_search, name="message-search-page"),
    path("messages/browse/", messages.message_browse, name="message-browse-page"),
    path("messages/<str:msg_id>/", messages.message_detail, name="message-page"),
    path("messages/<str:msg_id>/consume-directly/", clients.message_consume_directly,
         name="message-consume-directly-page"),
    path("dlq/", dlq.dlq_index, name="dlq-index-page"),
    path("dlq/<str:group>/", dlq.dlq_group, name="dlq-page"),
    path("dlq/<str:group>/resend-all/", dlq.dlq_resend_all, name="dlq-resend-all-page"),
    path("dlq/<str:group>/export.<str:fmt>", dlq.dlq_export, name="dlq-export-page"),
    path("jobs/<str:job_id>/", dlq.job_detail, name="job-page"),
    path("jobs/<str:job_id>/retry/", dlq.job_retry, name="job-retry-page"),
    path("scheduled-jobs/", jobs.job_list, name="scheduled-job-list-page"),
    path("scheduled-jobs/<str:name>/", jobs.job_detail, name="scheduled-job-page"),
    path("scheduled-jobs/<str:name>/run/", jobs.job_run_now, name="scheduled-job-run-page"),
    path("scheduled-jobs/<str:name>/schedule/", jobs.job_schedule, name="scheduled-job-schedule-page"),
    path("alerts/", alerts.alert_list, name="alert-list-page"),
    path("alerts/rules/new/", alerts.alert_rule_create, name="alert-rule-create-page"),
    path("alerts/rules/<int:rule_id>/edit/", alerts.alert_rule_edit, name="alert-rule-edit-page"),
    path("alerts/rules/<int:rule_id>/silence/", alerts.alert_rule_silence, name="alert-rule-silence-page"),
    path("alerts/rules/<int:rule_id>/delete/", alerts.alert_rule_delete, name="alert-rule-delete-page"),
    path("alerts/<int:alert_id>/resolve/", alerts.alert_resolve, name="alert-resolve-page"),
    path("search/", search.search, name="search-page"),
    path("search/jobs/<str:job_id>/", search.search_job, name="search-job-page"),
    path("search/jobs/<str:job_id>/cancel/", search.search_job_cancel, name="search-job-cancel-page"),
    path("search/jobs/<str:job_id>/export.<str:fmt>", search.search_job_export, name="search-job-export-page"),
    path("trace/", trace.trace, name="trace-page"),
    path("trace/jobs/<str:job_id>/", trace.trace_job, name="trace-job-page"),
    path("trace/jobs/<str:job_id>/cancel/", trace.trace_job_cancel, name="trace-job-cancel-page"),
    path("audit/", audit.audit_log, name="audit-page"),
    path("settings/", preferences.preferences, name="preferences-page"),
    path("users/", users.user_list, name="user-list-page"),
    path("users/<str:username>/role/", users.user_role, name="user-role-page"),
    path("users/<str:username>/token/<str:action>/", users.user_token, name="user-token-page"),
]

urlpatterns = [
    path("healthz", HealthView.as_view(), name="healthz"),
    path("", include("django_prometheus.urls")),  # /metrics (django-prometheus), for Prometheus to scrape
    path("api/v1/", include("console.api.urls")),
    path("admin/", admin.site.urls),
    *pages,
]
