"""Build and operator tools: the spark-submit bundle, the class-archive builder, the fake-queue CLI."""
