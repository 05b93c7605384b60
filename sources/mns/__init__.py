"""The Alibaba Cloud MNS source: ``source`` (the source) and ``client`` (the HTTP client its sink shares)."""
