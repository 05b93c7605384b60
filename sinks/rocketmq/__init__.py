"""The Apache RocketMQ sink: ``sink`` (the sink and its partition writer), ``lanes`` (ordered,
bounded sends), ``transports`` (the remoting and gRPC clients), ``probe`` and ``wire`` (why a
cluster refuses, read from the remoting protocol)."""
