"""Topic permissions shown as flags (read, write), as rocketmq-dashboard shows them."""

from __future__ import annotations

import pytest

from console.templatetags.console_tags import perm_flags


@pytest.mark.parametrize(("perm", "flags"), [(6, "RW"), (7, "RW"), (4, "R-"), (2, "-W"), (0, "--"), ("6", "RW"),
                                             ("x", "x"), (None, "")])
def test_perm_flags(perm: object, flags: str) -> None:
    assert perm_flags(perm) == flags
