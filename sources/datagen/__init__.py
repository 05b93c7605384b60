"""The datagen source: generated rows (Flink's ``datagen`` connector), ``source``."""
