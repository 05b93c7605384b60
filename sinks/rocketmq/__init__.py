"""The Apache RocketMQ sink: ``sink`` (the sink and its partition writer, on ``ingest.connector.SendBuffer``),
``lanes`` (the producer its lanes share: one message a call, each with a deadline),
``transports`` (the remoting and gRPC clients), ``probe`` and ``wire`` (why a cluster refuses,
read from the remoting protocol)."""
