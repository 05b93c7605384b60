-- Reference RocketMQ sink, CSV example (CSV格式): its mq_sink table as written for Flink (the
-- endpoint, the AccessKey pair, the topic, the group and the tag are placeholders, read from the
-- environment). The reference shows the table alone; the datagen source and the INSERT below
-- are added so the script runs (100 rows, ids 1-100).
--   export rmq_endpoint=127.0.0.1:9876 rmq_access_id=... rmq_access_key=... rmq_topic=... rmq_group=... rmq_tag=...
--   python -m ingest.run --sql conf/rocketmq_csv.sql
create table mq_sink (
    id INTEGER,
    len BIGINT,
    content VARCHAR
) with (
    'connector'='mq',
    'endpoint'='${rmq_endpoint}',
    'accessId'='${rmq_access_id}',
    'accessKey'='${secret_values.rmq_access_key}',
    'topic'='${rmq_topic}',
    'producerGroup'='${rmq_group}',
    'tag'='${rmq_tag}',
    'encoding'='utf-8',
    'retryTimes'='5',
    'sleepTimeMs'='500'
);

CREATE TEMPORARY TABLE orders (
    order_id BIGINT,
    note VARCHAR
) WITH (
    'connector' = 'datagen',
    'fields.order_id.kind' = 'sequence',
    'fields.order_id.start' = '1',
    'fields.order_id.end' = '100',
    'fields.note.length' = '12'
);

INSERT INTO mq_sink
SELECT CAST(order_id AS INT), CHAR_LENGTH(note), note
FROM orders;
