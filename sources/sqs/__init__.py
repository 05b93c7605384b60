"""The AWS SQS source: ``source`` (the source), ``client`` (boto3 clients and credentials, shared
with the SQS sink), ``crt`` (the awscrt client)."""
