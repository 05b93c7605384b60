"""Tests on a real Spark standalone cluster (master + worker on 127.0.0.1) with jobs run by spark-submit."""
