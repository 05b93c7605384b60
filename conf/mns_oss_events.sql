-- Reference SMQ example 2, "Consume OSS event notification messages", as written for Flink; only
-- the endpoint is a placeholder (the AccessKey pair already is one), read from the environment:
--   export mns_endpoint=http://<account-id>.mns.cn-hangzhou.aliyuncs.com ak_id=... ak_secret=...
--   python -m ingest.run --sql conf/mns_oss_events.sql

-- Create an MNS source table to automatically parse OSS event notification JSON.
-- For field name mappings, see the "Read OSS event notifications" section.
CREATE TEMPORARY TABLE oss_event_source (
`eventName` STRING,
`eventSource` STRING,
`eventTime` TIMESTAMP(3),
`region` STRING,
`ossBucketName` STRING,
`ossObjectKey` STRING,
`ossObjectSize` BIGINT,
`responseElementsRequestId` STRING,
`userIdentityPrincipalId` STRING
) WITH (
'connector' = 'mns',
'endpoint' = '${mns_endpoint}',
'region' = 'cn-hangzhou',
'queueName' = 'oss-events-queue',
'accessKeyId' = '${secret_values.ak_id}',
'accessKeySecret' = '${secret_values.ak_secret}',
'format' = 'json',
'messageType' = 'OSS'
);
-- Create a print sink to test output.
CREATE TEMPORARY TABLE print_sink (
`eventName` STRING,
`ossBucketName` STRING,
`ossObjectKey` STRING,
`ossObjectSize` BIGINT,
`eventTime` TIMESTAMP(3)
) WITH (
'connector' = 'print'
);
-- Filter for ObjectCreated events and output results.
INSERT INTO print_sink
SELECT eventName, ossBucketName, ossObjectKey, ossObjectSize, eventTime
FROM oss_event_source
WHERE eventName LIKE 'ObjectCreated:%';
