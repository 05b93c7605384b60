"""One micro-batch: the Spark query, the foreachBatch handler, dedup, transforms, bad rows, checks."""
