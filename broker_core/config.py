"""Broker configuration: RocketMQ ``broker.conf`` keys, Python field names with units.

Sources, lowest priority first: defaults, a ``broker.conf`` file (Java properties syntax), environment
variables ``BROKER_CORE_<KEY>`` (``<KEY>`` is the conf key in upper snake case, e.g.
``BROKER_CORE_DELETE_WHEN=04``, or the conf key itself, e.g. ``BROKER_CORE_deleteWhen``), and
explicit overrides (command-line options). Unknown keys are kept in ``extra`` and reported by
``unknown_keys`` rather than rejected, so a full upstream ``broker.conf`` loads unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_core.codec.properties_file import parse_properties

ENV_PREFIX = "BROKER_CORE_"

FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
WRITE_MODES = ("pwrite", "mmap")
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")
SECRET_KEYS = frozenset({"clusterSecret"})  # never reported (GET_BROKER_CONFIG leaves them out)


class ConfigError(ValueError):
    """A configuration value that cannot be used; names the key and the source."""


def _f(key: str, default: Any, doc: str, aliases: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"key": key, "doc": doc, "aliases": aliases})


@dataclass
class BrokerConfig:
    # Identity and cluster
    broker_cluster_name: str = _f("brokerClusterName", "DefaultCluster", "cluster this broker belongs to")
    broker_name: str = _f("brokerName", "broker-a", "broker name; master and slaves share it")
    broker_id: int = _f("brokerId", 0, "0 = master, >0 = slave")
    broker_role: str = _f("brokerRole", "ASYNC_MASTER", "ASYNC_MASTER | SYNC_MASTER | SLAVE")
    broker_ip: str = _f("brokerIP1", "127.0.0.1", "IPv4 address stored in records and message ids")
    listen_port: int = _f("listenPort", 10911, "port the broker serves on")
    grpc_listen_port: int = _f("grpcListenPort", -1, "RocketMQ 5 gRPC (MessagingService) port on the listen "
                               "host; -1 = off, 0 = any free port (--grpc-listen HOST:PORT overrides)")
    grpc_tls_cert_file: str = _f("grpcTlsCertFile", "", "PEM certificate chain: serve gRPC over TLS (with the key)")
    grpc_tls_key_file: str = _f("grpcTlsKeyFile", "", "PEM private key of grpcTlsCertFile")
    namesrv_addr: str = _f("namesrvAddr", "", "name servers, HOST:PORT[;HOST:PORT]")
    register_name_server_period_ms: int = _f(
        "registerNameServerPeriod", 30_000, "re-register with the name servers this often (they expire at 120 s)")
    auto_create_topic_enable: bool = _f("autoCreateTopicEnable", True,
                                        "create unknown topics on first send (clients route them by TBW102)")
    default_topic_queue_nums: int = _f("defaultTopicQueueNums", 4, "queues of an auto-created topic")
    enable_property_filter: bool = _f(
        "enablePropertyFilter", False, "filter pulls by SQL92 expressions over message properties (as RocketMQ, "
        "off by default: SQL92 subscriptions are then refused)")
    server_channel_max_idle_time_s: float = _f(
        "serverChannelMaxIdleTimeSeconds", 120, "close a connection silent for this long (half-open peers)")
    server_max_frame_bytes: int = _f("serverMaxFrameBytes", 16 * 1024 * 1024, "largest frame a client may send")
    server_max_inflight: int = _f("serverMaxInflightPerConnection", 4096, "requests in flight per connection")
    long_polling_max_s: float = _f("longPollingMaxSeconds", 15, "longest a pull waits for new messages")
    long_polling_enable: bool = _f(
        "longPollingEnable", True, "hold pulls until a message arrives (else short polling: one wait of "
        "shortPollingTimeMills, then an empty answer)")
    short_polling_time_ms: int = _f("shortPollingTimeMills", 1000, "the wait of a pull when longPollingEnable is off")
    flush_consumer_offset_interval_ms: int = _f(
        "flushConsumerOffsetInterval", 5000, "write consumerOffset.json this often (the seeds' 5 s; also at "
        "shutdown); a SIGKILL can lose the commits of this window, which are then consumed again")
    write_buffer_high_water_mark_bytes: int = _f(
        "writeBufferHighWaterMark", 4 * 1024 * 1024,
        "stop reading a connection while its unsent responses pass this many bytes (0 = the loop's 64 KiB)")
    write_buffer_low_water_mark_bytes: int = _f(
        "writeBufferLowWaterMark", 1024 * 1024, "resume reading once its unsent responses drain under this")
    max_held_pulls_per_connection: int = _f(
        "maxHeldPullsPerConnection", 1024, "pulls and receives held by long polling per connection; past it they "
        "answer at once")
    fast_listen_enable: bool = _f(
        "fastListenEnable", True, "also serve listenPort-2 (older Java clients send there) when the port is fixed")
    region_id: str = _f("regionId", "DefaultRegion", "sent as MSG_REGION in every send response")
    trace_on: bool = _f("traceOn", True, "sent as TRACE_ON in every send response (clients' trace switch)")
    reject_transaction_message: bool = _f(
        "rejectTransactionMessage", False, "refuse half (transaction) messages with NO_PERMISSION")
    access_message_in_memory_max_ratio: int = _f(
        "accessMessageInMemoryMaxRatio", 40, "percent of RAM behind the CommitLog end counted as 'in memory'")
    # Master/slave replication (RocketMQ HA; see README "Master and slaves")
    ha_listen_port: int = _f("haListenPort", -1, "HA port of a master: -1 = listenPort + 1 (RocketMQ's rule), "
                             "0 = any free port (shown as haListenPort in the runtime info)")
    broker_ip2: str = _f("brokerIP2", "", "address advertised for HA (haServerAddr); default brokerIP1")
    ha_master_address: str = _f("haMasterAddress", "", "a slave's master HA address HOST:PORT; default the one "
                                "the name server answers registration with")
    ha_send_heartbeat_interval_ms: int = _f("haSendHeartbeatInterval", 5000, "HA heartbeat period (both sides)")
    ha_housekeeping_interval_ms: int = _f("haHousekeepingInterval", 20_000, "drop a silent HA connection after")
    ha_transfer_batch_size: int = _f("haTransferBatchSize", 32 * 1024, "largest chunk a master sends a slave")
    ha_slave_fallbehind_max_bytes: int = _f(
        "haSlaveFallbehindMax", 256 * 1024 * 1024, "SYNC_MASTER: a slave further behind than this is not usable")
    slave_timeout_ms: int = _f("slaveTimeout", 3000, "SYNC_MASTER: wait for a slave's ack before "
                               "FLUSH_SLAVE_TIMEOUT (RocketMQ 4.9.3+)")
    slave_read_enable: bool = _f("slaveReadEnable", False, "pull responses may send consumers to a slave")
    slave_synchronize_interval_ms: int = _f(
        "slaveSynchronizeInterval", 10_000, "a slave copies topics, offsets, delay offsets and groups from its "
        "master this often (RocketMQ's fixed 10 s)")
    # Access control (RocketMQ ACL 1.0; see README "Access control")
    acl_enable: bool = _f("aclEnable", False, "check signed requests against plain_acl.yml (needs clusterSecret)")
    acl_file: str = _f("aclFile", "", "the plain_acl.yml (default ROOT/config/plain_acl.yml); reloaded on change")
    cluster_secret: str = _f(
        "clusterSecret", "", "signs registrations with the name servers (the same as their --cluster-secret); "
        "never shown by GET_BROKER_CONFIG")
    # Paths
    store_path_root_dir: str = _f("storePathRootDir", str(Path.home() / "store"), "store root directory")
    store_path_commit_log: str = _f("storePathCommitLog", "", "CommitLog directory (default ROOT/commitlog)")
    store_path_consume_queue: str = _f(
        "storePathConsumeQueue", "", "ConsumeQueue directory (default ROOT/consumequeue)")
    store_path_index: str = _f("storePathIndex", "", "IndexFile directory (default ROOT/index)")
    store_checkpoint: str = _f("storeCheckpoint", "", "checkpoint file (default ROOT/checkpoint)")
    abort_file: str = _f("abortFile", "", "abort marker file (default ROOT/abort)")
    # Files and limits
    mapped_file_size_commit_log_bytes: int = _f(
        "mapedFileSizeCommitLog", 1024 * 1024 * 1024, "CommitLog segment size", ("mappedFileSizeCommitLog",))
    mapped_file_size_consume_queue_bytes: int = _f(
        "mapedFileSizeConsumeQueue", 300_000 * 20, "ConsumeQueue file size (multiple of 20)",
        ("mappedFileSizeConsumeQueue",))
    max_message_size_bytes: int = _f("maxMessageSize", 4 * 1024 * 1024, "largest body accepted")
    warm_mapped_file_enable: bool = _f(
        "warmMapedFileEnable", False, "pre-fault the next CommitLog segment (writes it once with zeros)",
        ("warmMappedFileEnable",))
    prefault_ahead_bytes: int = _f(
        "prefaultAheadBytes", 8 * 1024 * 1024, "bytes past the CommitLog write position a background thread faults "
        "in for writing (madvise MADV_POPULATE_WRITE) so appends take no page faults; 0 = off (not a RocketMQ key)")
    commit_log_write_mode: str = _f(
        "commitLogWriteMode", "pwrite", "how appends reach the CommitLog's page cache: pwrite (records staged in "
        "memory, written with pwrite; the mapping is for reads) | mmap (stored through the shared mapping, with "
        "prefaulting); see store/mapped_file.py stage (not a RocketMQ key)")
    # Flush
    flush_disk_type: str = _f("flushDiskType", "ASYNC_FLUSH", "ASYNC_FLUSH | SYNC_FLUSH")
    flush_interval_commit_log_ms: int = _f("flushIntervalCommitLog", 500, "async flush interval")
    flush_commit_log_least_pages: int = _f("flushCommitLogLeastPages", 4, "dirty 4 KiB pages before an async flush")
    flush_commit_log_thorough_interval_ms: int = _f(
        "flushCommitLogThoroughInterval", 10_000, "flush everything at least this often")
    flush_commit_log_timed: bool = _f("flushCommitLogTimed", False, "sleep instead of waiting for a wakeup")
    flush_interval_consume_queue_ms: int = _f("flushIntervalConsumeQueue", 1000, "ConsumeQueue flush interval")
    flush_consume_queue_least_pages: int = _f("flushConsumeQueueLeastPages", 2, "dirty pages before a CQ flush")
    flush_consume_queue_thorough_interval_ms: int = _f(
        "flushConsumeQueueThoroughInterval", 60_000, "flush all ConsumeQueues at least this often")
    sync_flush_timeout_ms: int = _f("syncFlushTimeout", 5000, "SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT")
    transient_store_pool_enable: bool = _f(
        "transientStorePoolEnable", False, "not supported: appends always go to the mapped file")
    # Index and query
    message_index_enable: bool = _f("messageIndexEnable", True, "build IndexFiles for keys and unique ids")
    max_hash_slot_num: int = _f("maxHashSlotNum", 5_000_000, "hash slots per IndexFile")
    max_index_num: int = _f("maxIndexNum", 20_000_000, "entries per IndexFile")
    default_query_max_num: int = _f("defaultQueryMaxNum", 32, "default cap of a key query")
    max_msgs_num_batch: int = _f("maxMsgsNumBatch", 64, "most messages one key query (QUERY_MESSAGE) answers")
    snapshot_max_lifetime_ms: int = _f(
        "snapshotMaxLifetimeMs", 6 * 3600 * 1000, "a segment snapshot is removed this long after it was taken, "
        "whatever TTL it asked for")
    # Recovery
    check_crc_on_recover: bool = _f("checkCRCOnRecover", True, "verify body CRCs during recovery")
    # Retention and disk guard
    delete_when: str = _f("deleteWhen", "04", "hours (HH, ';'-separated) when expired files are deleted")
    file_reserved_time_hours: float = _f("fileReservedTime", 72, "keep files at least this many hours")
    disk_max_used_space_percent: int = _f("diskMaxUsedSpaceRatio", 75, "percent of disk use that triggers a clean")
    disk_space_clean_forcibly_ratio: float = _f(
        "diskSpaceCleanForciblyRatio", 0.85, "disk use ratio that cleans regardless of age")
    disk_space_warning_level_ratio: float = _f(
        "diskSpaceWarningLevelRatio", 0.90, "disk use ratio that refuses writes")
    clean_file_forcibly_enable: bool = _f("cleanFileForciblyEnable", True, "allow cleaning unexpired files when full")
    delete_commit_log_files_interval_ms: int = _f("deleteCommitLogFilesInterval", 100, "pause between deletions")
    delete_consume_queue_files_interval_ms: int = _f(
        "deleteConsumeQueueFilesInterval", 100, "pause between CQ deletions")
    destroy_mapped_file_interval_forcibly_ms: int = _f(
        "destroyMapedFileIntervalForcibly", 120_000, "force-release a file readers still hold after this long",
        ("destroyMappedFileIntervalForcibly",))
    clean_resource_interval_ms: int = _f("cleanResourceInterval", 10_000, "period of the built-in cleaner; 0 = off")
    clock_offset_ms: int = _f(
        "clockOffsetMs", 0, "shift the broker's clock (ms) — for rehearsing deleteWhen and delays; 0 in production")
    disk_usage_probe_file: str = _f(
        "diskUsageProbeFile", "", "read the disk-use ratio from this file instead of the file system (drills, tests)")
    # Delivery (used by later subsystems)
    message_delay_level: str = _f(
        "messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", "delay levels")
    schedule_deliver_interval_ms: int = _f(
        "scheduleDeliverIntervalMs", 1000, "the broker's own delay-level delivery tick; 0 = only when asked")
    flush_delay_offset_interval_ms: int = _f("flushDelayOffsetInterval", 10_000, "persist delay progress this often")
    transaction_timeout_ms: int = _f("transactionTimeOut", 6000, "age before an unresolved half message is checked")
    transaction_check_max: int = _f("transactionCheckMax", 15, "check-backs before a half message is rolled back")
    transaction_check_interval_ms: int = _f("transactionCheckInterval", 60_000, "how often half messages are checked")
    trace_topic_enable: bool = _f("traceTopicEnable", False, "record message lifecycle events in RMQ_SYS_TRACE_TOPIC")
    max_reconsume_times: int = _f("maxReconsumeTimes", 16, "default retries before a message is dead-lettered")
    pop_inflight_message_threshold: int = _f(
        "popInflightMessageThreshold", 10_000, "received-not-acked messages per group; past it receives hand out "
        "only redeliveries")
    os_page_cache_busy_timeout_ms: int = _f(
        "osPageCacheBusyTimeOutMills", 1000, "a send arriving while a put has held the store lock this long answers "
        "SYSTEM_BUSY at once ([PC_SYNCHRONIZED]), so the producer retries on another broker")
    wait_time_mills_in_send_queue: int = _f(
        "waitTimeMillsInSendQueue", 200, "a send that waited this long for the store lock answers SYSTEM_BUSY "
        "([TIMEOUT_CLEAN_QUEUE])")

    extra: dict[str, str] = field(default_factory=dict, metadata={"key": None})

    # ------------------------------------------------------------------ derived paths
    @property
    def commit_log_dir(self) -> Path:
        return Path(self.store_path_commit_log or Path(self.store_path_root_dir) / "commitlog")

    @property
    def consume_queue_dir(self) -> Path:
        return Path(self.store_path_consume_queue or Path(self.store_path_root_dir) / "consumequeue")

    @property
    def index_dir(self) -> Path:
        return Path(self.store_path_index or Path(self.store_path_root_dir) / "index")

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.store_checkpoint or Path(self.store_path_root_dir) / "checkpoint")

    @property
    def abort_path(self) -> Path:
        return Path(self.abort_file or Path(self.store_path_root_dir) / "abort")

    @property
    def config_dir(self) -> Path:
        return Path(self.store_path_root_dir) / "config"

    @property
    def acl_file_path(self) -> Path:
        return Path(self.acl_file or Path(self.store_path_root_dir) / "config" / "plain_acl.yml")

    @property
    def lock_path(self) -> Path:
        return Path(self.store_path_root_dir) / "lock"

    @property
    def unknown_keys(self) -> list[str]:
        return sorted(self.extra)

    def with_store_dir(self, store_dir: str | os.PathLike[str]) -> BrokerConfig:
        """A copy rooted at ``store_dir`` with every store path derived from it."""
        return dataclasses.replace(
            self, store_path_root_dir=str(store_dir), store_path_commit_log="", store_path_consume_queue="",
            store_path_index="", store_checkpoint="", abort_file="", extra=dict(self.extra))

    def validate(self) -> BrokerConfig:
        if self.commit_log_write_mode not in WRITE_MODES:
            raise ConfigError(f"commitLogWriteMode must be one of {WRITE_MODES}, got {self.commit_log_write_mode!r}")
        if self.flush_disk_type not in FLUSH_TYPES:
            raise ConfigError(f"flushDiskType must be one of {FLUSH_TYPES}, got {self.flush_disk_type!r}")
        if self.broker_role not in BROKER_ROLES:
            raise ConfigError(f"brokerRole must be one of {BROKER_ROLES}, got {self.broker_role!r}")
        if self.mapped_file_size_consume_queue_bytes % 20:
            raise ConfigError("mapedFileSizeConsumeQueue must be a multiple of 20")
        if self.mapped_file_size_commit_log_bytes < 4096:
            raise ConfigError("mapedFileSizeCommitLog must be at least 4096 bytes")
        if self.prefault_ahead_bytes < 0:
            raise ConfigError(f"prefaultAheadBytes must be >= 0 (0 = off), got {self.prefault_ahead_bytes}")
        if self.transient_store_pool_enable:
            raise ConfigError("transientStorePoolEnable=true is not supported by broker_core")
        if self.cluster_secret and len(self.cluster_secret) < 7:
            raise ConfigError("clusterSecret must be longer than 6 characters")
        if self.acl_enable and not self.cluster_secret:
            raise ConfigError("aclEnable=true needs clusterSecret (the name servers' --cluster-secret), so that "
                              "no one else can register a broker under this broker's name")
        for hour in self.delete_when_hours:
            if not 0 <= hour <= 23:
                raise ConfigError(f"deleteWhen hour {hour} is not in 00..23")
        return self

    @property
    def delete_when_hours(self) -> list[int]:
        try:
            return [int(h) for h in self.delete_when.replace(",", ";").split(";") if h.strip()]
        except ValueError:
            raise ConfigError(f"deleteWhen must be hours like '04' or '04;05', got {self.delete_when!r}") from None

    @property
    def delay_levels_ms(self) -> list[int]:
        units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for item in self.message_delay_level.split():
            unit = "ms" if item.endswith("ms") else item[-1:]
            try:
                out.append(int(item[: -len(unit)]) * units[unit])
            except (KeyError, ValueError):
                raise ConfigError(f"messageDelayLevel item {item!r} is not like 5s, 1m, 2h (or 200ms)") from None
        return out

    # ------------------------------------------------------------------ loading
    @classmethod
    def keys(cls) -> dict[str, dataclasses.Field[Any]]:
        """Map of every accepted conf key (and alias) to its field."""
        out = {}
        for f in dataclasses.fields(cls):
            key = f.metadata.get("key")
            if key:
                out[key] = f
                for alias in f.metadata.get("aliases", ()):
                    out[alias] = f
        return out

    @classmethod
    def parse_updates(cls, props: Mapping[str, str]) -> dict[str, Any]:
        """``{field name: value}`` for the known keys of ``props`` (unknown keys are skipped); raises
        :class:`ConfigError` for a value of the wrong type."""
        keys = cls.keys()
        return {keys[k].name: _coerce(keys[k], raw, k) for k, raw in props.items() if k in keys}

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
        keys = cls.keys()
        for key, raw in values.items():
            f = keys.get(key)
            if f is None:
                cfg.extra[key] = raw
                continue
            setattr(cfg, f.name, _coerce(f, raw, key))
        for name, value in (overrides or {}).items():
            setattr(cfg, name, value)
        return cfg.validate()


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
