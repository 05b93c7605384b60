"""The AWS SQS sink: ``sink`` (the sink and its partition writer)."""
