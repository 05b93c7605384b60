"""Meanings of the framework's options whose config field has no attribute docstring, for the option tables.

The generated option tables (``python -m ingest.config.reference``) take an option's meaning from
its field's docstring; these are used where there is none, for the framework's own models only
(``ingest.config``): a connector's options carry their meanings as field docstrings in its own
folder. A docstring, once written, wins, and the entry here can go. Keys are ``Class.field`` (the
class that declares the field); ``{sources}`` and ``{sinks}`` stand for the registered connectors'
types (``ingest.config.registry``).
"""

from __future__ import annotations

MEANINGS: dict[str, str] = {
    # The job
    "JobConfig.sources": "The queues to read: one entry per source, `type: {sources}`.",
    "JobConfig.sinks": "The targets: one entry per sink, `type: {sinks}`.",
    "JobConfig.dead_letter": "Where bad messages go when `on_bad_message` is `dead_letter` "
    "(`path` or `sink`).",
    "JobConfig.state": "The dedup state: a Delta table of the keys seen (below).",
    "JobConfig.staging": "Where and how receivers stage messages for Spark (below).",
    "JobConfig.trigger": "When micro-batches run, and whether the job drains and stops (below).",
    "JobConfig.spark": "The Spark session (below).",
    "JobConfig.metrics": "The Prometheus file and HTTP endpoint, and the per-batch line (below).",
    "StagingConfig.archive_dir": "With `clean_source: archive`: where Spark moves staged files once read.",
    # Every source: decoding and receiving
    "DecodeOptions.json_fail_on_missing_field": "A JSON body without one of the schema's fields is a "
    "bad message (Flink's option); false: the column is null.",
    "DecodeOptions.json_ignore_parse_errors": "Skip bodies that cannot be decoded (counted, acked), as "
    "Flink does; sets `on_bad_message: skip` when that is not given.",
    "DecodeOptions.json_timestamp_standard": "How JSON timestamps are read: `ISO-8601` (any fraction "
    "digits, offsets `Z`, `+08`, `+0800`, `+08:00` or none, read as UTC) or `SQL` "
    "(`yyyy-MM-dd HH:mm:ss`).",
    "DecodeOptions.json_timestamp_pattern": "A Spark datetime pattern for JSON timestamps instead of "
    "the standard's.",
    "DecodeOptions.csv_delimiter": "format csv: the field delimiter, one character.",
    "ReceiveOptions.delete_max_retries": "Retries of a delete call that failed (throttling, 5xx, "
    "network) before the message counts in `failedDeletes`.",
    # delivery
    "DeliveryConfig.enabled": "false: no job events are sent (the section stays for later).",
    "DeliveryConfig.workspace": "The reference's workspace field, copied into every message.",
    "DeliveryConfig.namespace": "The reference's namespace field, copied into every message.",
    "DeliveryConfig.tag": "A free tag copied into every message.",
    "DeliveryConfig.start_log_level": "The lowest log level the start log captures.",
    "DeliveryConfig.targets": "Where the messages go: `file`, `sink` or `sls` targets (below).",
    "FileTarget.path": "The JSON-lines file messages are appended to.",
    "SinkTarget.batch_size": "Most messages per sink write.",
    "SinkTarget.linger": "How long the sender waits for more messages to fill a write.",
    "SinkTarget.sink": "A sink's settings, as under `sinks:` (use `body_format: raw`).",
    "SlsTarget.project": "The SLS project.",
    "SlsTarget.logstore": "The Logstore in it.",
    "SlsTarget.endpoint": "The SLS endpoint; default `https://<region>.log.aliyuncs.com`.",
    "SlsTarget.region": "The project's region (needed for v4 signing, or without `endpoint`).",
    "SlsTarget.authorization": "AccessKey pair, or an STS token: with its pair, or, when no key is "
    "given, from Alibaba Cloud's default credential chain (environment, OIDC, credentials file, ECS "
    "RAM role).",
    "SlsTarget.access_key_id": "The AccessKey ID (access_key: required).",
    "SlsTarget.access_key_secret": "The AccessKey secret (kept out of every log and error).",
    "SlsTarget.security_token": "sts_token: the STS token.",
    "SlsTarget.topic": "The logs' `__topic__`.",
    "SlsTarget.compress": "PutLogs body compression.",
    "ClaimCheckConfig.access_key_secret": "The secret of `access_key_id` (kept out of every log and error).",
}
