"""The Alibaba Cloud MNS sink: ``sink`` (the sink and its partition writer)."""
