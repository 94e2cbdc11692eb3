"""Topic pages: list with search and type filter, create (admin), detail with route and per-queue offsets,
send a test message (operator+), delete with a confirmation step (admin)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import RFC3986_SUBDELIMS
from django.views.decorators.http import require_http_methods, require_POST

from console.errors import ApiError
from console.roles import ADMIN, OPERATOR, VIEWER
from console.selectors import messages as message_selectors
from console.selectors import topics as topic_selectors
from console.selectors.ui_messages import reproduce_initial
from console.services import messages as message_services
from console.services import topics as topic_services
from console.views.base import page
from console.views.forms import SendMessageForm, TopicCreateForm

PAGE_SIZE = 200  # topics per list page


def page_href(url_name: str) -> Callable[[str], str]:
    """``arg -> reverse(url_name, args=[arg])`` at the cost of a ``quote``, for list pages' links (200 topics a
    page): the URL is reversed once with a marker and the argument quoted as Django's reverse quotes path
    arguments."""
    marker = "PAGEHREFMARKER"
    head, tail = reverse(url_name, args=[marker]).split(marker)
    return lambda arg: head + quote(arg, safe=RFC3986_SUBDELIMS + "/~:@") + tail


def _topic_href() -> Callable[[str], str]:
    return page_href("topic-page")


def _list_context(request: HttpRequest) -> dict[str, object]:
    search = request.GET.get("search", "").strip()
    kind = request.GET.get("type", "")
    if kind not in topic_selectors.TOPIC_TYPES:
        kind = ""
    try:
        page_no = int(request.GET.get("page", 1))
    except ValueError:
        page_no = 1
    found = topic_selectors.topics_page(search, kind, page_no, PAGE_SIZE)
    href = _topic_href()
    rows = [{**t, "href": href(t["name"])} for t in found["results"]]
    return {"topics": rows, "count": found["count"], "page": found["page"], "pages": found["pages"],
            "search": search, "kind": kind, "types": topic_selectors.TOPIC_TYPES}


@page(VIEWER)
@require_http_methods(["GET"])
def topic_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/topic_list.html", {**_list_context(request), "form": TopicCreateForm()})


@page(ADMIN)
@require_POST
def topic_create(request: HttpRequest) -> HttpResponse:
    form = TopicCreateForm(request.POST)
    if form.is_valid():
        d = form.cleaned_data
        try:
            topic_services.create_topic(request.user, d["name"], d["read_queue_nums"], d["write_queue_nums"],
                                        d["perm"])
        except ApiError as exc:
            form.add_error("name" if exc.error_code == "topic_exists" else None, str(exc.detail))
        else:
            messages.success(request, f"Topic {d['name']} created.")
            return redirect("topic-page", name=d["name"])
    return render(request, "console/topic_list.html", {**_list_context(request), "form": form, "show_create": True},
                  status=400)


def _detail_context(name: str) -> dict[str, object]:
    topic = topic_selectors.get_topic(name)
    route = topic_selectors.topic_route(name)
    stats = topic_selectors.topic_stats(name)
    addrs = {b["brokerName"]: b.get("brokerAddrs", {}).get("0", "-") for b in route.get("brokerDatas", [])}
    return {"topic": topic, "addrs": addrs, "stats": stats,
            "total_messages": sum(q["max_offset"] - q["min_offset"] for q in stats)}


@page(VIEWER)
@require_http_methods(["GET"])
def topic_detail(request: HttpRequest, name: str) -> HttpResponse:
    return render(request, "console/topic_detail.html", {**_detail_context(name), "send_form": SendMessageForm()})


@page(OPERATOR)
@require_http_methods(["GET", "POST"])
def topic_send(request: HttpRequest, name: str) -> HttpResponse:
    """POST: send the form's message. GET ``?from=<offset id>``: the topic page with the send form pre-filled
    from that message (body, tags, keys, properties) to re-produce it."""
    if request.method == "GET":
        source = message_selectors.message_by_offset_id(request.GET.get("from", "").strip())
        form = SendMessageForm(initial=reproduce_initial(source))
        return render(request, "console/topic_detail.html",
                      {**_detail_context(name), "send_form": form, "reproducing": source.offset_msg_id})
    form = SendMessageForm(request.POST)
    results = None
    status = 400
    if form.is_valid():
        results = message_services.produce(request.user, name, [form.message()],
                                           reproduced_from=form.cleaned_data.get("reproduced_from") or None)
        status = 201
        form = SendMessageForm(initial={"tags": form.cleaned_data.get("tags"), "keys": form.cleaned_data.get("keys")})
    return render(request, "console/topic_detail.html",
                  {**_detail_context(name), "send_form": form, "send_results": results}, status=status)


@page(ADMIN)
@require_http_methods(["GET", "POST"])
def topic_delete(request: HttpRequest, name: str) -> HttpResponse:
    topic = topic_selectors.get_topic(name)
    if request.method == "POST":
        if request.POST.get("confirm_name") != name:
            return render(request, "console/topic_delete.html",
                          {"topic": topic, "error": "Type the topic's name exactly to confirm."}, status=400)
        topic_services.delete_topic(request.user, name)
        messages.success(request, f"Topic {name} deleted.")
        return redirect("topic-list-page")
    return render(request, "console/topic_delete.html", {"topic": topic})
