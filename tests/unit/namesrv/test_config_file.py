"""``python -m broker_core.namesrv --config FILE``: RocketMQ's namesrv keys fill the flags not given; flags win;
``enableControllerInNamesrv=true`` yields the embedded controller's config from the same file."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.namesrv.__main__ import apply_config_file, build_parser


def _args(tmp_path: Path, text: str, *flags: str):  # type: ignore[no-untyped-def]
    conf = tmp_path / "namesrv.conf"
    conf.write_text(text)
    args = build_parser().parse_args(["--config", str(conf), *flags])
    return args, apply_config_file(args)


def test_keys_fill_what_the_flags_leave(tmp_path: Path) -> None:
    args, ctl = _args(tmp_path, "listenPort=9877\nbindAddress=0.0.0.0\nscanNotActiveBrokerInterval=4000\n"
                                f"kvConfigPath={tmp_path / 'kv.json'}\norderMessageEnable=true\n")
    assert (args.listen, args.scan_interval_ms, args.kv_config_path, args.order_message_enable) == (
        ("0.0.0.0", 9877), 4000, tmp_path / "kv.json", True)
    assert ctl is None
    args, _ = _args(tmp_path, "listenPort=9877\n", "--listen", "127.0.0.1:0", "--scan-interval-ms", "700")
    assert (args.listen, args.scan_interval_ms, args.order_message_enable) == (("127.0.0.1", 0), 700, False)


def test_defaults_without_a_file() -> None:
    args = build_parser().parse_args([])
    assert apply_config_file(args) is None
    assert (args.listen, args.scan_interval_ms, args.kv_config_path) == (("127.0.0.1", 9876), 10_000, None)


def test_embedded_controller_config(tmp_path: Path) -> None:
    _, ctl = _args(tmp_path, "enableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n"
                             "enableElectUncleanMaster=true\nscanNotActiveBrokerInterval=2000\n")
    assert ctl is not None
    assert (ctl.controller_dleger_group, ctl.enable_elect_unclean_master, ctl.scan_not_active_broker_interval_ms,
            ctl.controller_dleger_peers) == ("g", True, 2000, "")


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="listenPort"):
        _args(tmp_path, "listenPort=nine\n")
    with pytest.raises(ValueError, match="scanNotActiveBrokerInterval"):
        _args(tmp_path, "scanNotActiveBrokerInterval=-1\n")
