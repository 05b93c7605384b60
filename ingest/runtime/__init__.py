"""The JVM and Spark session under a job: session settings, JIT, class archive, memory, console logging."""
