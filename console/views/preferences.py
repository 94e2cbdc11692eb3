"""The user's own settings page: the time zone every page shows times in (the light/dark theme is the header's
toggle, remembered by the browser)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from console.roles import VIEWER
from console.selectors.preferences import timezones, user_timezone
from console.services.preferences import set_timezone
from console.views.base import page


class PreferencesForm(forms.Form):
    timezone = forms.ChoiceField(label="Time zone", help_text="IANA zone; every page shows times in it")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["timezone"].choices = [(z, z) for z in timezones()]


@page(VIEWER)
@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = PreferencesForm(request.POST)
        if form.is_valid():
            name = set_timezone(request.user, form.cleaned_data["timezone"])
            messages.success(request, f"Times are now shown in {name}.")
            return redirect("preferences-page")
        return render(request, "console/preferences.html", {"form": form}, status=400)
    form = PreferencesForm(initial={"timezone": user_timezone(request.user)})
    return render(request, "console/preferences.html", {"form": form})
