-- Reference SMQ example 1, "Consume standard JSON messages", as written for Flink; only the
-- endpoint and the AccessKey pair are placeholders, read from the environment:
--   export mns_endpoint=http://<account-id>.mns.cn-hangzhou.aliyuncs.com ak_id=... ak_secret=...
--   python -m ingest.run --sql conf/mns_json_console.sql
-- Job settings (checkpoint, state, staging, trigger): conf/mns_json_console.settings.yaml.

-- Create an MNS source table.
-- Field names must match the keys in the JSON message body.
CREATE TEMPORARY TABLE mns_source (
`userId` BIGINT,
`action` STRING,
`timestamp` TIMESTAMP(3),
`payload` STRING
) WITH (
'connector' = 'mns',
'endpoint' = '${mns_endpoint}',
'region' = 'cn-hangzhou',
'queueName' = 'my-events-queue',
'accessKeyId' = '${secret_values.ak_id}',
'accessKeySecret' = '${secret_values.ak_secret}',
'format' = 'json'
);
-- Create a print sink to test output.
CREATE TEMPORARY TABLE print_sink (
`userId` BIGINT,
`action` STRING,
`timestamp` TIMESTAMP(3),
`payload` STRING
) WITH (
'connector' = 'print'
);
-- Consume messages and write to the sink.
INSERT INTO print_sink
SELECT userId, action, timestamp, payload
FROM mns_source;
