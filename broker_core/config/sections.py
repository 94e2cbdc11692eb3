"""The sections of :class:`broker_core.config.BrokerConfig`, one dataclass per concern.

Each field carries its RocketMQ ``broker.conf`` key (``_f``); field names are unique across all sections and the
top level (``broker_core.config`` checks it at import). A concern's code is given its own section.
Add a key to the section of the code that reads it, with RocketMQ's key name and default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value that cannot be used; names the key and the source."""


def _f(key: str, default: Any, doc: str, aliases: tuple[str, ...] = ()) -> Any:
    return field(default=default, metadata={"key": key, "doc": doc, "aliases": aliases})


@dataclass
class StoreConfig:
    """The store's files: where they live, their sizes, how appends reach them, the index, recovery
    (RocketMQ's MessageStoreConfig, less flush, retention and HA)."""

    store_path_root_dir: str = _f("storePathRootDir", str(Path.home() / "store"), "store root directory")
    store_path_commit_log: str = _f("storePathCommitLog", "", "CommitLog directory (default ROOT/commitlog)")
    store_path_consume_queue: str = _f(
        "storePathConsumeQueue", "", "ConsumeQueue directory (default ROOT/consumequeue)")
    store_path_index: str = _f("storePathIndex", "", "IndexFile directory (default ROOT/index)")
    store_checkpoint: str = _f("storeCheckpoint", "", "checkpoint file (default ROOT/checkpoint)")
    abort_file: str = _f("abortFile", "", "abort marker file (default ROOT/abort)")
    mapped_file_size_commit_log_bytes: int = _f(
        "mapedFileSizeCommitLog", 1024 * 1024 * 1024, "CommitLog segment size", ("mappedFileSizeCommitLog",))
    mapped_file_size_consume_queue_bytes: int = _f(
        "mapedFileSizeConsumeQueue", 300_000 * 20, "ConsumeQueue file size (multiple of 20)",
        ("mappedFileSizeConsumeQueue",))
    max_message_size_bytes: int = _f("maxMessageSize", 4 * 1024 * 1024, "largest body accepted")
    warm_mapped_file_enable: bool = _f(
        "warmMapedFileEnable", False, "write each new CommitLog segment whole with zeros and sync it before use: "
        "its full size on disk from creation; off, segments are sparse and only prefaultAheadBytes are reserved",
        ("warmMappedFileEnable",))
    prefault_ahead_bytes: int = _f(
        "prefaultAheadBytes", 8 * 1024 * 1024, "bytes past the CommitLog write position a background thread reserves "
        "(posix_fallocate) and brings in (madvise MADV_POPULATE_WRITE, or fadvise WILLNEED under pwrite) so appends "
        "take no page faults and meet a full disk as ENOSPC; 0 = off (not a RocketMQ key)")
    commit_log_write_mode: str = _f(
        "commitLogWriteMode", "pwrite", "how appends reach the CommitLog's page cache: pwrite (records staged in "
        "memory, written with pwrite; the mapping is for reads) | mmap (stored through the shared mapping, with "
        "prefaulting); see store/mapped_file.py stage (not a RocketMQ key)")
    transient_store_pool_enable: bool = _f(
        "transientStorePoolEnable", False, "not supported: appends always go to the mapped file")
    data_read_ahead_enable: bool = _f(
        "dataReadAheadEnable", True, "a pull reading more than a window behind the end advises the next 16 MiB of the "
        "CommitLog and 1 MiB of the ConsumeQueue WILLNEED (posix_fadvise), once per half window (store/readahead.py);"
        " false: the kernel's default read-around only")
    message_index_enable: bool = _f("messageIndexEnable", True, "build IndexFiles for keys and unique ids")
    max_hash_slot_num: int = _f("maxHashSlotNum", 5_000_000, "hash slots per IndexFile")
    max_index_num: int = _f("maxIndexNum", 20_000_000, "entries per IndexFile")
    default_query_max_num: int = _f("defaultQueryMaxNum", 32, "default cap of a key query")
    check_crc_on_recover: bool = _f("checkCRCOnRecover", True, "verify body CRCs during recovery")

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
    def lock_path(self) -> Path:
        return Path(self.store_path_root_dir) / "lock"


@dataclass
class FlushConfig:
    """When appended bytes reach the disk: the flush services and the SYNC_FLUSH wait."""

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

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"


@dataclass
class RetentionConfig:
    """Expired-file deletion and the disk guard (the seeds' cleaner)."""

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

    @property
    def delete_when_hours(self) -> list[int]:
        try:
            return [int(h) for h in self.delete_when.replace(",", ";").split(";") if h.strip()]
        except ValueError:
            raise ConfigError(f"deleteWhen must be hours like '04' or '04;05', got {self.delete_when!r}") from None


@dataclass
class RemotingConfig:
    """The RocketMQ remoting server's limits per connection (RocketMQ's NettyServerConfig part)."""

    server_channel_max_idle_time_s: float = _f(
        "serverChannelMaxIdleTimeSeconds", 120, "close a connection silent for this long (half-open peers)")
    server_max_frame_bytes: int = _f("serverMaxFrameBytes", 16 * 1024 * 1024, "largest frame a client may send")
    server_max_inflight: int = _f("serverMaxInflightPerConnection", 4096, "requests in flight per connection")
    long_polling_max_s: float = _f("longPollingMaxSeconds", 15, "longest a pull waits for new messages")
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


@dataclass
class GrpcConfig:
    """The RocketMQ 5 gRPC endpoint (broker_core/grpc)."""

    grpc_listen_port: int = _f("grpcListenPort", -1, "RocketMQ 5 gRPC (MessagingService) port on the listen "
                               "host; -1 = off, 0 = any free port (--grpc-listen HOST:PORT overrides)")
    grpc_tls_cert_file: str = _f("grpcTlsCertFile", "", "PEM certificate chain: serve gRPC over TLS (with the key)")
    grpc_tls_key_file: str = _f("grpcTlsKeyFile", "", "PEM private key of grpcTlsCertFile")
    # push consumers' invisible time, renewed as Apache's proxy does (ProxyConfig's keys and defaults)
    enable_proxy_auto_renew: bool = _f("enableProxyAutoRenew", True, "renew the invisible time of messages a "
                                       "receive with auto_renew (push consumers) got, until acked")
    default_invisible_time_ms: int = _f("defaultInvisibleTimeMills", 60_000, "invisible time of an auto_renew "
                                        "receive's messages (whatever it asked)")
    renew_ahead_time_ms: int = _f("renewAheadTimeMillis", 10_000, "renew a handle this close to its deadline")
    renew_schedule_period_ms: int = _f("renewSchedulePeriodMillis", 5_000, "how often handles are looked at")
    renew_max_time_ms: int = _f("renewMaxTimeMillis", 3 * 3600 * 1000, "stop renewing this long after the "
                                "receive (the message comes back at its deadline)")


@dataclass
class HaConfig:
    """Master/slave replication (RocketMQ HA; see README 'Master and slaves')."""

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
    slave_synchronize_interval_ms: int = _f(
        "slaveSynchronizeInterval", 10_000, "a slave copies topics, offsets, delay offsets and groups from its "
        "master this often (RocketMQ's fixed 10 s)")


@dataclass
class AclConfig:
    """Access control (RocketMQ ACL 1.0; see README 'Access control'); the secret it needs is the broker's
    ``clusterSecret``."""

    acl_enable: bool = _f("aclEnable", False, "check signed requests against plain_acl.yml (needs clusterSecret)")
    acl_file: str = _f("aclFile", "", "the plain_acl.yml (default ROOT/config/plain_acl.yml); reloaded on change")


@dataclass
class TimerConfig:
    """Delayed delivery: the delay levels and the broker's own delivery tick."""

    message_delay_level: str = _f(
        "messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", "delay levels")
    schedule_deliver_interval_ms: int = _f(
        "scheduleDeliverIntervalMs", 1000, "the broker's own delay-level delivery tick; 0 = only when asked")
    flush_delay_offset_interval_ms: int = _f("flushDelayOffsetInterval", 10_000, "persist delay progress this often")
    timer_max_delay_sec: int = _f(
        "timerMaxDelaySec", 3 * 24 * 3600, "latest a timer message (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, "
        "gRPC delivery_timestamp) may ask to be delivered, from now; later is refused (MESSAGE_ILLEGAL)")

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


@dataclass
class TransactionConfig:
    """Half (transaction) messages: when they are checked back and given up."""

    transaction_timeout_ms: int = _f("transactionTimeOut", 6000, "age before an unresolved half message is checked")
    transaction_check_max: int = _f("transactionCheckMax", 15, "check-backs before a half message is rolled back")
    transaction_check_interval_ms: int = _f("transactionCheckInterval", 60_000, "how often half messages are checked")


@dataclass
class ControllerModeConfig:
    """RocketMQ 5 controller mode, broker side (automatic master election; see
    ``/work/shared/reference/rocketmq-controller.md`` §1 "Broker keys"). RocketMQ's keys and defaults."""

    enable_controller_mode: bool = _f(
        "enableControllerMode", False, "take the role and brokerId from the controllers at controllerAddr")
    controller_addr: str = _f("controllerAddr", "", "controllers, HOST:PORT[;HOST:PORT]")
    controller_heartbeat_timeout_ms: int = _f(
        "controllerHeartBeatTimeoutMills", 10_000, "the controllers count this broker inactive after this silence")
    broker_heartbeat_interval_ms: int = _f("brokerHeartbeatInterval", 1000, "heartbeat to the controllers")
    sync_broker_metadata_period_ms: int = _f(
        "syncBrokerMetadataPeriod", 5000, "ask the controllers for this broker-set's replica info this often")
    check_sync_state_set_period_ms: int = _f(
        "checkSyncStateSetPeriod", 5000, "master: check the SyncStateSet for slaves to drop this often")
    broker_election_priority: int = _f(
        "brokerElectionPriority", 2**31 - 1, "lower wins an election among equally caught-up replicas")
    all_ack_in_sync_state_set: bool = _f(
        "allAckInSyncStateSet", False, "a SYNC_MASTER put waits for every SyncStateSet member")
    in_sync_replicas: int = _f("inSyncReplicas", 1, "replicas (master included) a put waits for")
    min_in_sync_replicas: int = _f("minInSyncReplicas", 1, "fewest in-sync replicas that still accept puts")
    ha_max_time_slave_not_catchup_ms: int = _f(
        "haMaxTimeSlaveNotCatchup", 15_000, "drop a slave from the SyncStateSet when not caught up this long")
    store_path_epoch_file: str = _f(
        "storePathEpochFile", "", "the epoch file (default ROOT/epochFileCheckpoint)")
    store_path_broker_identity: str = _f(
        "storePathBrokerIdentity", "", "the controller id this broker was given (default ROOT/brokerIdentity)")
    sync_from_last_file: bool = _f(
        "syncFromLastFile", False, "an empty slave starts at the master's last CommitLog file")
    async_learner: bool = _f("asyncLearner", False, "replicate but never join the SyncStateSet (never elected)")


@dataclass
class MetricsConfig:
    """Metrics export, RocketMQ 5's keys (off by default)."""

    metrics_exporter_type: str = _f(
        "metricsExporterType", "DISABLE", "DISABLE | OTLP_GRPC | PROM | LOG")
    metrics_prom_exporter_host: str = _f(
        "metricsPromExporterHost", "", "PROM: address the Prometheus endpoint listens on (empty = all)")
    metrics_prom_exporter_port: int = _f("metricsPromExporterPort", 5557, "PROM: its port (0: a free one)")
    metrics_label: str = _f("metricsLabel", "", "k:v,k:v pairs added to every series (malformed pairs skipped)")
