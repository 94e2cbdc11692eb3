"""Broker configuration: RocketMQ ``broker.conf`` keys, Python field names with units, grouped by concern.

``BrokerConfig`` holds the broker's identity and its own behaviour (sending, consuming) and one section per
other concern: ``store`` (:class:`StoreConfig`), ``flush``, ``retention``, ``remoting``, ``grpc``, ``ha``, ``acl``,
``timer``, ``transaction``, ``controller`` (RocketMQ 5 controller mode) and ``metrics``. Each concern's code is
given its own section. The sections are declared in ``broker_core/config/sections.py`` (add a key there, to the
section of the code that reads it); this module holds the top level, the flat key index and loading.
The files keep RocketMQ's flat keys: a key names one field wherever it sits
(:meth:`BrokerConfig.keys`), and ``GET_BROKER_CONFIG`` lists them flat (:meth:`BrokerConfig.properties`).

Sources, lowest priority first: defaults, a ``broker.conf`` file (Java properties syntax), environment
variables ``BROKER_CORE_<KEY>`` (``<KEY>`` is the conf key in upper snake case, e.g.
``BROKER_CORE_DELETE_WHEN=04``, or the conf key itself, e.g. ``BROKER_CORE_deleteWhen``), and
explicit overrides (command-line options, by field name). Unknown keys are kept in ``extra`` and reported by
``unknown_keys`` rather than rejected, so a full upstream ``broker.conf`` loads unchanged.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_core.codec.properties_file import parse_properties
from broker_core.config.sections import (
    AclConfig,
    ConfigError,
    ControllerModeConfig,
    FlushConfig,
    GrpcConfig,
    HaConfig,
    MetricsConfig,
    RemotingConfig,
    RetentionConfig,
    StoreConfig,
    TimerConfig,
    TransactionConfig,
    _f,
)

__all__ = [
    "BROKER_ROLES", "ENV_PREFIX", "FLUSH_TYPES", "METRICS_EXPORTER_TYPES", "SECRET_KEYS", "WRITE_MODES", "AclConfig",
    "BrokerConfig", "ConfigError", "ConfigKey", "ControllerModeConfig", "FlushConfig", "GrpcConfig", "HaConfig",
    "MetricsConfig", "RemotingConfig", "RetentionConfig", "StoreConfig", "TimerConfig", "TransactionConfig",
]

ENV_PREFIX = "BROKER_CORE_"

FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
WRITE_MODES = ("pwrite", "mmap")
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
METRICS_EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")
SECRET_KEYS = frozenset({"clusterSecret"})  # never reported (GET_BROKER_CONFIG leaves them out)


@dataclass(frozen=True)
class ConfigKey:
    """One conf key: the section it sits in (``""`` = the top level) and its field."""

    key: str
    section: str
    field: dataclasses.Field[Any]

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def doc(self) -> str:
        return str(self.field.metadata["doc"])

    @property
    def default(self) -> Any:
        return self.field.default

    @property
    def canonical(self) -> bool:
        """False for an alias (``mappedFileSizeCommitLog`` of ``mapedFileSizeCommitLog``)."""
        return self.key == self.field.metadata["key"]


@dataclass
class BrokerConfig:
    """The whole configuration: the broker's identity and its own behaviour here, each other concern in a section.

    Invariants: every conf key names exactly one field, at the top level or in one section; field names are
    unique across sections (``set_field`` and ``load``'s overrides find them by name); the sections are held,
    never replaced, so a service keeps seeing ``UPDATE_BROKER_CONFIG``'s changes to the section it was given.
    """

    # Identity and cluster
    broker_cluster_name: str = _f("brokerClusterName", "DefaultCluster", "cluster this broker belongs to")
    broker_name: str = _f("brokerName", "broker-a", "broker name; master and slaves share it")
    broker_id: int = _f("brokerId", 0, "0 = master, >0 = slave")
    broker_role: str = _f("brokerRole", "ASYNC_MASTER", "ASYNC_MASTER | SYNC_MASTER | SLAVE")
    broker_ip: str = _f("brokerIP1", "127.0.0.1", "IPv4 address stored in records and message ids")
    listen_port: int = _f("listenPort", 10911, "port the broker serves on")
    namesrv_addr: str = _f("namesrvAddr", "", "name servers, HOST:PORT[;HOST:PORT]")
    register_name_server_period_ms: int = _f(
        "registerNameServerPeriod", 30_000, "re-register with the name servers this often (they expire at 120 s)")
    force_register: bool = _f(
        "forceRegister", False, "a master's periodic registration sends its topics even when every name server "
        "holds its topic DataVersion (RocketMQ's default is true; false here: an unchanged heartbeat is one "
        "QUERY_DATA_VERSION per name server, which also refreshes the broker's liveness)")
    compressed_register: bool = _f(
        "compressedRegister", False, "send REGISTER_BROKER's body deflated in RocketMQ's compact form (one "
        "'topic read write perm filterType' line per topic: order and topicSysFlag are not carried, as upstream)")
    cluster_secret: str = _f(
        "clusterSecret", "", "signs registrations with the name servers (the same as their --cluster-secret); "
        "never shown by GET_BROKER_CONFIG")
    # Sending
    auto_create_topic_enable: bool = _f("autoCreateTopicEnable", True,
                                        "create unknown topics on first send (clients route them by TBW102)")
    default_topic_queue_nums: int = _f("defaultTopicQueueNums", 4, "queues of an auto-created topic")
    region_id: str = _f("regionId", "DefaultRegion", "sent as MSG_REGION in every send response")
    trace_on: bool = _f("traceOn", True, "sent as TRACE_ON in every send response (clients' trace switch)")
    reject_transaction_message: bool = _f(
        "rejectTransactionMessage", False, "refuse half (transaction) messages with NO_PERMISSION")
    os_page_cache_busy_timeout_ms: int = _f(
        "osPageCacheBusyTimeOutMills", 1000, "a send arriving while a put has held the store lock this long answers "
        "SYSTEM_BUSY at once ([PC_SYNCHRONIZED]), so the producer retries on another broker")
    wait_time_mills_in_send_queue: int = _f(
        "waitTimeMillsInSendQueue", 200, "a send that waited this long for the store lock answers SYSTEM_BUSY "
        "([TIMEOUT_CLEAN_QUEUE])")

    # Consuming
    enable_property_filter: bool = _f(
        "enablePropertyFilter", False, "filter pulls by SQL92 expressions over message properties (as RocketMQ, "
        "off by default: SQL92 subscriptions are then refused)")
    long_polling_enable: bool = _f(
        "longPollingEnable", True, "hold pulls until a message arrives (else short polling: one wait of "
        "shortPollingTimeMills, then an empty answer)")
    short_polling_time_ms: int = _f("shortPollingTimeMills", 1000, "the wait of a pull when longPollingEnable is off")
    access_message_in_memory_max_ratio: int = _f(
        "accessMessageInMemoryMaxRatio", 40, "percent of RAM behind the CommitLog end counted as 'in memory'")
    slave_read_enable: bool = _f("slaveReadEnable", False, "pull responses may send consumers to a slave")
    flush_consumer_offset_interval_ms: int = _f(
        "flushConsumerOffsetInterval", 5000, "write consumerOffset.json this often (the seeds' 5 s; also at "
        "shutdown); a SIGKILL can lose the commits of this window, which are then consumed again")
    max_reconsume_times: int = _f("maxReconsumeTimes", 16, "default retries before a message is dead-lettered")
    pop_inflight_message_threshold: int = _f(
        "popInflightMessageThreshold", 10_000, "received-not-acked messages per group; past it receives hand out "
        "only redeliveries")
    max_msgs_num_batch: int = _f("maxMsgsNumBatch", 64, "most messages one key query (QUERY_MESSAGE) answers")
    trace_topic_enable: bool = _f("traceTopicEnable", False, "record message lifecycle events in RMQ_SYS_TRACE_TOPIC")
    msg_trace_topic_name: str = _f("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC",
                                   "with traceTopicEnable: also created at start-up for clients' own trace records")
    # Maintenance and drills
    snapshot_max_lifetime_ms: int = _f(
        "snapshotMaxLifetimeMs", 6 * 3600 * 1000, "a segment snapshot is removed this long after it was taken, "
        "whatever TTL it asked for")
    clock_offset_ms: int = _f(
        "clockOffsetMs", 0, "shift the broker's clock (ms) — for rehearsing deleteWhen and delays; 0 in production")
    disk_usage_probe_file: str = _f(
        "diskUsageProbeFile", "", "read the disk-use ratio from this file instead of the file system (drills, tests)")

    store: StoreConfig = field(default_factory=StoreConfig, metadata={"section": True})
    flush: FlushConfig = field(default_factory=FlushConfig, metadata={"section": True})
    retention: RetentionConfig = field(default_factory=RetentionConfig, metadata={"section": True})
    remoting: RemotingConfig = field(default_factory=RemotingConfig, metadata={"section": True})
    grpc: GrpcConfig = field(default_factory=GrpcConfig, metadata={"section": True})
    ha: HaConfig = field(default_factory=HaConfig, metadata={"section": True})
    acl: AclConfig = field(default_factory=AclConfig, metadata={"section": True})
    timer: TimerConfig = field(default_factory=TimerConfig, metadata={"section": True})
    transaction: TransactionConfig = field(default_factory=TransactionConfig, metadata={"section": True})
    controller: ControllerModeConfig = field(default_factory=ControllerModeConfig, metadata={"section": True})
    metrics: MetricsConfig = field(default_factory=MetricsConfig, metadata={"section": True})

    extra: dict[str, str] = field(default_factory=dict, metadata={"key": None})

    # ------------------------------------------------------------------ derived paths (across sections)
    @property
    def config_dir(self) -> Path:
        return self.store.config_dir

    @property
    def acl_file_path(self) -> Path:
        return Path(self.acl.acl_file or self.store.config_dir / "plain_acl.yml")

    @property
    def acl_enable(self) -> bool:
        """``acl.acl_enable``, read by name from the config by the C send lane (server/send_fast.py make_lane)."""
        return self.acl.acl_enable

    @property
    def epoch_file_path(self) -> Path:
        return Path(self.controller.store_path_epoch_file
                    or Path(self.store.store_path_root_dir) / "epochFileCheckpoint")

    @property
    def unknown_keys(self) -> list[str]:
        return sorted(self.extra)

    def copy(self) -> BrokerConfig:
        """A deep copy: its sections are its own."""
        return copy.deepcopy(self)

    def with_store_dir(self, store_dir: str | os.PathLike[str]) -> BrokerConfig:
        """A copy rooted at ``store_dir`` with every store path derived from it."""
        out = self.copy()
        out.store = dataclasses.replace(
            self.store, store_path_root_dir=str(store_dir), store_path_commit_log="", store_path_consume_queue="",
            store_path_index="", store_checkpoint="", abort_file="")
        out.controller.store_path_epoch_file = ""
        return out

    def validate(self) -> BrokerConfig:
        store, flush, ret = self.store, self.flush, self.retention
        if store.commit_log_write_mode not in WRITE_MODES:
            raise ConfigError(f"commitLogWriteMode must be one of {WRITE_MODES}, got {store.commit_log_write_mode!r}")
        if flush.flush_disk_type not in FLUSH_TYPES:
            raise ConfigError(f"flushDiskType must be one of {FLUSH_TYPES}, got {flush.flush_disk_type!r}")
        if self.broker_role not in BROKER_ROLES:
            raise ConfigError(f"brokerRole must be one of {BROKER_ROLES}, got {self.broker_role!r}")
        if store.mapped_file_size_consume_queue_bytes % 20:
            raise ConfigError("mapedFileSizeConsumeQueue must be a multiple of 20")
        if store.mapped_file_size_commit_log_bytes < 4096:
            raise ConfigError("mapedFileSizeCommitLog must be at least 4096 bytes")
        if store.prefault_ahead_bytes < 0:
            raise ConfigError(f"prefaultAheadBytes must be >= 0 (0 = off), got {store.prefault_ahead_bytes}")
        if store.transient_store_pool_enable:
            raise ConfigError("transientStorePoolEnable=true is not supported by broker_core")
        if self.cluster_secret and len(self.cluster_secret) < 7:
            raise ConfigError("clusterSecret must be longer than 6 characters")
        if self.acl.acl_enable and not self.cluster_secret:
            raise ConfigError("aclEnable=true needs clusterSecret (the name servers' --cluster-secret), so that "
                              "no one else can register a broker under this broker's name")
        for hour in ret.delete_when_hours:
            if not 0 <= hour <= 23:
                raise ConfigError(f"deleteWhen hour {hour} is not in 00..23")
        if self.metrics.metrics_exporter_type not in METRICS_EXPORTER_TYPES:
            raise ConfigError(f"metricsExporterType must be one of {METRICS_EXPORTER_TYPES}, "
                              f"got {self.metrics.metrics_exporter_type!r}")
        return self

    # ------------------------------------------------------------------ keys, flat
    @classmethod
    def keys(cls) -> dict[str, ConfigKey]:
        """Map of every accepted conf key (and alias) to where it sits."""
        return dict(_KEYS)

    @classmethod
    def key_of_field(cls, name: str) -> ConfigKey:
        """The conf key of the field called ``name`` (in whichever section); KeyError if none."""
        return _BY_FIELD[name]

    def _holder(self, k: ConfigKey) -> Any:
        return getattr(self, k.section) if k.section else self

    def get(self, key: str) -> Any:
        """The value of conf key ``key`` (or an alias); KeyError for an unknown key."""
        k = _KEYS[key]
        return getattr(self._holder(k), k.name)

    def set(self, key: str, value: Any) -> None:
        """Set conf key ``key`` (or an alias) to an already coerced ``value``, in its section."""
        k = _KEYS[key]
        setattr(self._holder(k), k.name, value)

    def set_field(self, name: str, value: Any) -> None:
        """Set the field called ``name``, in whichever section it sits (overrides, test helpers)."""
        k = _BY_FIELD[name]
        setattr(self._holder(k), k.name, value)

    def properties(self) -> dict[str, Any]:
        """``{conf key: value}`` of every key, flat, secrets included (callers leave out ``SECRET_KEYS``)."""
        return {k.key: getattr(self._holder(k), k.name) for k in _KEYS.values() if k.canonical}

    @classmethod
    def parse_updates(cls, props: Mapping[str, str]) -> dict[str, Any]:
        """``{conf key: value}`` for the known keys of ``props`` (unknown keys are skipped; an alias is
        answered under its key); raises :class:`ConfigError` for a value of the wrong type."""
        return {_KEYS[k].field.metadata["key"]: _coerce(_KEYS[k].field, raw, k)
                for k, raw in props.items() if k in _KEYS}

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        values: dict[str, str] = {}
        if path is not None:
            values.update(parse_properties(Path(path).read_text(encoding="utf-8"), source=str(path)))
        values.update(_from_env(os.environ if env is None else env))
        cfg = cls()
        for key, raw in values.items():
            k = _KEYS.get(key)
            if k is None:
                cfg.extra[key] = raw
                continue
            cfg.set(key, _coerce(k.field, raw, key))
        for name, value in (overrides or {}).items():
            cfg.set_field(name, value)
        return cfg.validate()


def _collect() -> tuple[dict[str, ConfigKey], dict[str, ConfigKey]]:
    keys: dict[str, ConfigKey] = {}
    by_field: dict[str, ConfigKey] = {}
    holders: list[tuple[str, type]] = [("", BrokerConfig)]
    for f in dataclasses.fields(BrokerConfig):
        if f.metadata.get("section") and isinstance(f.default_factory, type):
            holders.append((f.name, f.default_factory))
    for section, cls in holders:
        for f in dataclasses.fields(cls):
            key = f.metadata.get("key")
            if not key:
                continue
            k = ConfigKey(key, section, f)
            assert f.name not in by_field, f"field {f.name} is in two sections"
            by_field[f.name] = k
            for name in (key, *f.metadata.get("aliases", ())):
                assert name not in keys, f"conf key {name} is in two sections"
                keys[name] = ConfigKey(name, section, f)
    return keys, by_field


_KEYS, _BY_FIELD = _collect()


def _snake_upper(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).upper()


def _from_env(env: Mapping[str, str]) -> dict[str, str]:
    by_env = {}
    for key in BrokerConfig.keys():
        by_env[ENV_PREFIX + _snake_upper(key)] = key
        by_env[ENV_PREFIX + key] = key
    return {by_env[k]: v for k, v in env.items() if k in by_env}


def _coerce(f: dataclasses.Field[Any], raw: str, key: str) -> Any:
    kind = {"bool": bool, "int": int, "float": float}.get(str(f.type), str)
    raw = raw.strip()
    try:
        if kind is bool:
            low = raw.lower()
            if low not in ("true", "false"):
                raise ValueError
            return low == "true"
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a valid {kind.__name__}") from None
    return raw
