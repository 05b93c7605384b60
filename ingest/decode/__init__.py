"""From staged bodies to rows: text and binary formats, Avro schemas, OSS events, claim-check payloads."""
