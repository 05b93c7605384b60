"""Watching a job: health, queue depths, the drain rule, the run's summary, job events and their delivery."""
