"""The Spark writer sink: ``type: spark_writer``, any ``df.write`` format (jdbc, parquet, csv…)."""
