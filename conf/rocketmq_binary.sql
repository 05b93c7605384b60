-- Reference RocketMQ sink, binary example (二进制格式), as written for Flink; only the endpoint,
-- the AccessKey pair, the topic and the group are placeholders, read from the environment:
--   export rmq_endpoint=127.0.0.1:9876 rmq_access_id=... rmq_access_key=... rmq_topic=... rmq_group=...
--   python -m ingest.run --sql conf/rocketmq_binary.sql
-- The datagen source is unbounded (10,000 rows/s): stop the job with Ctrl-C.
CREATE TEMPORARY TABLE datagen_source (
    commodity VARCHAR
) WITH ( 
    'connector' = 'datagen' 
);

CREATE TEMPORARY TABLE mq_sink (
    mess VARBINARY
) WITH (
    'connector'='mq',
    'endpoint'='${rmq_endpoint}',
    'accessId'='${rmq_access_id}',
    'accessKey'='${secret_values.rmq_access_key}',
    'topic'='${rmq_topic}',
    'producerGroup'='${rmq_group}'
);

INSERT INTO mq_sink
SELECT 
     CAST(SUBSTRING(commodity,0,5) AS VARBINARY) AS mess   
FROM datagen_source;
