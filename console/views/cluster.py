"""The cluster / routes page: the broker groups (master, slaves, replication lag), controller mode's view of each
broker-set (master, epoch, SyncStateSet, election history) with the switch-over action, and each topic's route."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from console.roles import OPERATOR, VIEWER, has_role
from console.selectors.controller import controller_groups
from console.selectors.replication import broker_groups
from console.selectors.topics import TOPIC_TYPES
from console.selectors.ui_routes import topic_routes_page
from console.services import controller as controller_services
from console.views.base import page


@page(VIEWER)
@require_http_methods(["GET"])
def cluster(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("search", "").strip()[:255]
    kind = request.GET.get("type", "")
    if kind not in TOPIC_TYPES:
        kind = ""
    try:
        page_no = int(request.GET.get("page", 1))
    except ValueError:
        page_no = 1
    return render(request, "console/cluster.html", {"brokers": broker_groups(),
                                                    **topic_routes_page(search, kind, page_no),
                                                    "search": search, "kind": kind, "types": TOPIC_TYPES,
                                                    "controller": controller_groups(),
                                                    "can_switch": has_role(request.user, OPERATOR)})


@page(OPERATOR)
@require_http_methods(["GET", "POST"])
def switch_over(request: HttpRequest, broker_name: str, broker_id: int) -> HttpResponse:
    """Confirm, then make ``broker_id`` the master of ``broker_name`` (CONTROLLER_ELECT_MASTER, audited)."""
    view = controller_groups()
    group = next((g for g in view["groups"] if g["name"] == broker_name), None)
    if group is None:
        raise Http404(f"the controller knows no broker-set {broker_name!r}")
    replica = next((r for r in group["replicas"] if r["broker_id"] == broker_id), None)
    if replica is None:
        raise Http404(f"{broker_name} has no replica {broker_id}")
    if request.method == "POST":
        if request.POST.get("confirm_name") != broker_name:
            return render(request, "console/switch_over.html",
                          {"group": group, "replica": replica,
                           "error": "Type the broker-set's name exactly to confirm."}, status=400)
        after = controller_services.switch_over(request.user, group["cluster"], broker_name, broker_id)
        messages.success(request, f"{broker_name}: broker {after['master_broker_id']} is the master "
                                  f"(masterEpoch {after['master_epoch']}).")
        return redirect("cluster-page")
    return render(request, "console/switch_over.html", {"group": group, "replica": replica})
