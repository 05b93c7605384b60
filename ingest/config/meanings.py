"""Meanings of the options whose config field has no attribute docstring, for the option tables.

The generated option tables (``python -m ingest.config.reference``) take an option's meaning from
its field's docstring; these are used where there is none. A docstring, once written, wins, and
the entry here can go. Keys are ``Class.field`` (the class that declares the field); ``{sources}``
and ``{sinks}`` stand for the registered connectors' types (``ingest.config.registry``).
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
    # fake
    "FakeSourceConfig.queue": "The queue's name (its file is `<path>/<queue>.db`).",
    "FakeSourceConfig.fifo": "A FIFO queue: group ids, order per group, deduplication ids.",
    "FakeSourceConfig.batch_size": "Messages a receive brings at most.",
    "FakeSourceConfig.wait_time": "How long a receive waits for a first message (long polling).",
    "FakeSourceConfig.seed": "Demo messages put on the queue at start (`fake seed`, below).",
    "FakeSeed.messages": "JSON events to put on the queue.",
    "FakeSeed.duplicates": "Of those, how many are sent a second time (redeliveries to drop).",
    "FakeSeed.malformed": "Bodies that are not JSON, added to test the bad-message path.",
    "FakeSeed.only_if_empty": "Seed only a queue that holds no message (a rerun does not add more).",
    # sqs
    "SqsSourceConfig.proxy_url": (
        "An `http://` or `https://` proxy for the SQS (and claim-check S3) calls; "
        "HTTPS endpoints through it by CONNECT."
    ),
    "SqsSourceConfig.proxy_user": "The proxy's user name.",
    "SqsSourceConfig.proxy_password": "The proxy's password (kept out of every log and error).",
    "SqsSourceConfig.credentials_provider": "Where the AWS credentials come from: boto3's default "
    "chain, static keys (`aws.access.key.id`…), a named profile, a role to assume, or the user's own "
    "provider (`sqs.credentials.provider.class`).",
    "SqsSourceConfig.access_key_id": "static: the access key id.",
    "SqsSourceConfig.secret_access_key": "static: the secret access key (write it as `${env:NAME}`).",
    "SqsSourceConfig.session_token": "static: a session token, for temporary keys.",
    "SqsSourceConfig.profile": "profile: the AWS profile's name (`~/.aws/config`).",
    "SqsSourceConfig.role_arn": "assume_role: the role to assume.",
    "SqsSourceConfig.role_session_name": "assume_role: the role session's name.",
    "SqsSourceConfig.role_external_id": "assume_role: the external id the role's trust policy asks for.",
    # mns
    "MnsSourceConfig.security_token": "An STS token, with temporary AccessKeys.",
    "MnsSourceConfig.request_timeout": "Each HTTP read's timeout; longer than `pollingWaitTime`.",
    "MnsSourceConfig.base64_body": "Bodies are base64 (as the MNS SDKs send them); false: plain text.",
    "MnsSourceConfig.max_retries": "Retries of receive and visibility calls on throttling, 5xx and "
    "network errors.",
    # datagen
    "DatagenSourceConfig.rows_per_second": "Rows generated a second at most.",
    "DatagenSourceConfig.number_of_rows": "Rows in all: the source is bounded and the job ends once "
    "they are written; unset: unbounded.",
    "DatagenSourceConfig.fields": "Per column: how its values are generated (`fields.<column>`, below).",
    "DatagenSourceConfig.seed": "The random seed: row n is the same on every run with the same seed.",
    "DatagenSourceConfig.batch_size": "Rows a receive brings at most.",
    "DatagenField.kind": "`random` values within the limits below, or a `sequence` from `start` to `end`.",
    "DatagenField.max": "random numbers: the largest value (default: the type's range).",
    "DatagenField.start": "sequence: the first value.",
    "DatagenField.end": "sequence: the last value (the source ends there).",
    "DatagenField.null_rate": "The share of rows where the column is null, 0 to 1.",
    # sinks
    "FilesSinkConfig.format": "The files' format: JSON lines or Parquet.",
    "ConsoleSinkConfig.max_rows": "Rows printed per batch at most.",
    "ConsoleSinkConfig.truncate": "Cut long values as Spark's `show` does.",
    "FakeSinkConfig.queue": "The target queue's name.",
    "FakeSinkConfig.fifo": "A FIFO queue (group ids from `group_column`; dedup ids from the source "
    "message id).",
    "FakeSinkConfig.group_column": "FIFO: the column holding a row's group id.",
    "FakeSinkConfig.batch_size": "Messages per send call.",
    "SqsSinkConfig.endpoint_url": "Another SQS endpoint (LocalStack, moto, a VPC endpoint).",
    "SqsSinkConfig.credentials_provider": "Where the AWS credentials come from: boto3's default chain, "
    "static keys, a named profile, or a role to assume.",
    "SqsSinkConfig.access_key_id": "static: the access key id.",
    "SqsSinkConfig.secret_access_key": "static: the secret access key (write it as `${env:NAME}`).",
    "SqsSinkConfig.session_token": "static: a session token, for temporary keys.",
    "SqsSinkConfig.profile": "profile: the AWS profile's name.",
    "SqsSinkConfig.role_arn": "assume_role: the role to assume.",
    "SqsSinkConfig.role_session_name": "assume_role: the role session's name.",
    "SqsSinkConfig.role_external_id": "assume_role: the external id the role's trust policy asks for.",
    "SqsSinkConfig.sts_endpoint_url": "STS endpoint for `assume_role` (default: the regional AWS one).",
    "SqsSinkConfig.proxy_url": (
        "An `http://` or `https://` proxy for the SQS (and claim-check S3) calls; "
        "HTTPS endpoints through it by CONNECT."
    ),
    "SqsSinkConfig.proxy_user": "The proxy's user name.",
    "SqsSinkConfig.proxy_password": "The proxy's password (kept out of every log and error).",
    "SqsSinkConfig.fail_on_error": "Unset: re-send an entry that failed for a retryable reason "
    "`max_retries` times, then fail the batch (the job exits 1). `true`: fail the batch at the first "
    "such entry (the reference option). `false`: as Flink, re-send it until SQS takes it, waiting at "
    "most `backoff.max_interval` between tries (`max_retries` and `backoff.max_elapsed_time` do not "
    "apply); the batch is held, nothing acked; `/healthz` names the sink after "
    "`metrics.health_max_batch_age`; a stop cancels the write after `backoff.max_interval`.",
    "SqsSinkConfig.max_batch_size": "Messages per SendMessageBatch call.",
    "SqsSinkConfig.max_in_flight_requests": "SendMessageBatch calls running at once per writer.",
    "SqsSinkConfig.max_buffered_requests": "Messages a writer buffers before it waits for sends to finish.",
    "SqsSinkConfig.max_batch_size_in_bytes": "Bytes per SendMessageBatch call at most (default: the "
    "queue's `MaximumMessageSize`).",
    "SqsSinkConfig.max_time_in_buffer_ms": "Milliseconds a buffered message waits for its call to fill.",
    "SqsSinkConfig.max_record_size_in_bytes": "Larger messages are refused records (`on_bad_record`); "
    "default: the queue's `MaximumMessageSize`.",
    "SqsSinkConfig.backoff_max_interval": "...and waits at most this long between re-sends.",
    "RocketMqSinkConfig.endpoint": "The name server (remoting, `host:9876`) or proxy (grpc, `host:8081`).",
    "RocketMqSinkConfig.access_id": "The AccessKey ID, for an instance with ACLs.",
    "RocketMqSinkConfig.access_key": "The AccessKey secret (kept out of every log and error).",
    "RocketMqSinkConfig.tag": "The messages' tag (one per message; no `|`).",
    "RocketMqSinkConfig.encoding": "payload csv and json: the body's character set.",
    "RocketMqSinkConfig.instance_id": "The instance's namespace, for an instance that has one.",
    "RocketMqSinkConfig.key_column": "The column sent as the message key (default: the source message id).",
    "RocketMqSinkConfig.sharding_key_column": "Send in order per value of this column (ordered messages).",
    "RocketMqSinkConfig.property_columns": "Columns sent as user properties.",
    "RocketMqSinkConfig.max_in_flight": "Sends running at once per writer.",
    "RocketMqSinkConfig.client_log_dir": "Where the RocketMQ clients write their own log files.",
    "MnsSinkConfig.endpoint": "The MNS endpoint, `http(s)://<account>.mns.<region>.aliyuncs.com`.",
    "MnsSinkConfig.queue_name": "The target queue.",
    "MnsSinkConfig.access_key_id": "The AccessKey ID.",
    "MnsSinkConfig.access_key_secret": "The AccessKey secret (kept out of every log and error).",
    "MnsSinkConfig.security_token": "An STS token, with temporary AccessKeys.",
    "MnsSinkConfig.base64_body": "Send bodies base64-encoded (the SDKs' default).",
    "MnsSinkConfig.priority_column": "A row's message priority (1-16) from this column.",
    "MnsSinkConfig.delay_column": "A row's delay in seconds (0-604800) from this column.",
    "MnsSinkConfig.max_retries": "Re-sends of a batch's failed messages before the batch fails.",
    "MnsSinkConfig.batch_size": "Messages per BatchSendMessage call.",
    "MnsSinkConfig.max_body_bytes": "Larger bodies (as sent, after base64) are refused records "
    "(`on_bad_record`), or offloaded with `claim_check`.",
    "MnsSinkConfig.request_timeout": "Each HTTP call's timeout.",
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
