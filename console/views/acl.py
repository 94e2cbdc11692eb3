"""The broker ACL page: per cluster, each broker's ACL-config version with brokers out of step marked, the
accounts (never their secrets) and the global white list; admins create, update and delete accounts and replace
the white list on every broker of the cluster at once, and see each broker's result. A secret is shown once,
on the page that answers the request that set it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from console.roles import ADMIN, VIEWER
from console.selectors.acl import acl_overview, clusters
from console.services.acl import PERMS, AccountInput, delete_account, save_account, set_global_white
from console.views.base import page

PERM_CHOICES = [(p, p) for p in PERMS]


def _items(text: str) -> list[str]:
    return [i.strip() for i in text.replace(",", "\n").splitlines() if i.strip()]


class AclAccountForm(forms.Form):
    access_key = forms.CharField(min_length=7, max_length=128)
    secret_key = forms.CharField(required=False, max_length=128, widget=forms.PasswordInput(render_value=False),
                                 help_text="blank: keep the current secret, or generate one for a new account")
    new = forms.BooleanField(required=False, initial=True, label="New account")
    admin = forms.BooleanField(required=False)
    white_remote_address = forms.CharField(required=False, max_length=512)
    default_topic_perm = forms.ChoiceField(choices=PERM_CHOICES, initial="DENY")
    default_group_perm = forms.ChoiceField(choices=PERM_CHOICES, initial="SUB")
    topic_perms = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                  help_text="one topic=PERM a line, e.g. orders=PUB|SUB")
    group_perms = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                  help_text="one group=PERM a line")

    def account(self) -> AccountInput:
        d = self.cleaned_data
        return AccountInput(d["access_key"], d["secret_key"], d["admin"], d["white_remote_address"],
                            d["default_topic_perm"], d["default_group_perm"], _items(d["topic_perms"]),
                            _items(d["group_perms"]))


class AclWhiteForm(forms.Form):
    patterns = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                               help_text="one address pattern a line (10.1.1.*, 192.168.0.7, 10.1.1.1-20)")


def _render(request: HttpRequest, cluster: str, extra: dict[str, Any], status: int = 200) -> HttpResponse:
    overview = acl_overview(cluster or None)
    context = {"overview": overview, "clusters": clusters(), "cluster": overview["cluster"],
               "account_form": AclAccountForm(), "white_form": AclWhiteForm(
                   initial={"patterns": "\n".join(overview["global_white"])}), **extra}
    return render(request, "console/acl.html", context, status=status)


@page(VIEWER)
@require_http_methods(["GET"])
def acl_page(request: HttpRequest) -> HttpResponse:
    return _render(request, request.GET.get("cluster", "").strip(), {})


@page(ADMIN)
@require_http_methods(["POST"])
def acl_account_save(request: HttpRequest) -> HttpResponse:
    cluster = str(request.POST.get("cluster", "")).strip()
    form = AclAccountForm(request.POST)
    if not form.is_valid():
        return _render(request, cluster, {"account_form": form}, status=400)
    result = save_account(request.user, cluster or None, form.account(), new=form.cleaned_data["new"])
    return _render(request, cluster, {"result": result, "result_what": f"account {result['access_key']} saved"})


@page(ADMIN)
@require_http_methods(["POST"])
def acl_account_delete(request: HttpRequest) -> HttpResponse:
    cluster = str(request.POST.get("cluster", "")).strip()
    key = str(request.POST.get("access_key", "")).strip()
    if request.POST.get("confirm") != "yes":  # deleting an account everywhere locks its clients out at once
        return _render(request, cluster, {"delete_error": f"Tick 'sure' to delete {key} on every broker."},
                       status=400)
    result = delete_account(request.user, cluster or None, key)
    return _render(request, cluster, {"result": result, "result_what": f"account {key} deleted"})


@page(ADMIN)
@require_http_methods(["POST"])
def acl_white_save(request: HttpRequest) -> HttpResponse:
    cluster = str(request.POST.get("cluster", "")).strip()
    form = AclWhiteForm(request.POST)
    if not form.is_valid():
        return _render(request, cluster, {"white_form": form}, status=400)
    result = set_global_white(request.user, cluster or None, _items(form.cleaned_data["patterns"]))
    return _render(request, cluster, {"result": result, "result_what": "global white list saved"})
