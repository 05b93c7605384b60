"""Unit tests: no Spark, no network."""
