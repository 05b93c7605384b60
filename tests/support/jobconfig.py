"""One job-config builder for the tests, the cluster suite and the benchmarks: a source, sinks, a root dir."""

from __future__ import annotations

from pathlib import Path

SCHEMA = "event_id BIGINT, user_id BIGINT, action STRING, amount DOUBLE, ts TIMESTAMP"
"""The columns of the tests' events (``tests.support.jobs.body``)."""


def fake_source(root: Path | str, name: str = "src", **over) -> dict:
    """A fake-queue source on ``root/queues`` (queue ``in``): 2 receivers, 50 a receive, JSON.

    Args:
        root: the job's directory; the queue's file lives in ``root/queues``.
        name: the source's name.
        **over: source options replacing these.

    Returns:
        The source dict.
    """
    src = {
        "type": "fake",
        "name": name,
        "path": str(Path(root) / "queues"),
        "queue": "in",
        "receivers": 2,
        "batch_size": 50,
        "wait_time": "200ms",
        "visibility_timeout": "30s",
        "format": "json",
        "on_bad_message": "skip",
    }
    return src | over


def sqs_source(url: str, endpoint: str, name: str = "src", **over) -> dict:
    """An SQS source on ``url`` through ``endpoint`` (moto, LocalStack, a proxy): 2 receivers,
    1 s long polls, JSON; ``over`` replaces these options or adds others."""
    src = {
        "type": "sqs",
        "name": name,
        "sqs.url": url,
        "sqs.endpoint.url": endpoint,
        "sqs.waittime.seconds": 1,
        "receivers": 2,
        "format": "json",
    }
    return src | over


def files_sink(root: Path | str, **over) -> dict:
    """A files sink ``out`` writing JSON lines to ``root/out``; ``over`` replaces its options."""
    return {"type": "files", "name": "out", "path": str(Path(root) / "out"), "format": "jsonl"} | over


def job_config(
    source: dict | list[dict],
    root: Path | str,
    sinks: list[dict] | None = None,
    *,
    name: str = "t-job",
    schema: str = SCHEMA,
    staging: dict | None = None,
    **over,
) -> dict:
    """A job config dict whose checkpoint, state and staging live under ``root``.

    Defaults: a draining run (``available_now``, one idle round) on ``local[2]`` logging errors
    only; staged files rolled at 200 messages or 200 ms; no metrics settings.

    Args:
        source: the source dict, or a list of them.
        root: the job's directory: ``checkpoint``, ``state`` and ``staging`` (and the default
            sink's ``out``) go there.
        sinks: the sink dicts; by default one ``files_sink(root)``.
        name: the job's name.
        schema: the DDL the bodies decode to.
        staging: staging settings instead of the default roll sizes; ``dir`` is
            ``root/staging`` unless given.
        **over: other top-level keys (``trigger``, ``spark``, ``metrics``, ``transform``, ...),
            each replacing the default's whole value.

    Returns:
        The config dict, as a job YAML would hold it.
    """
    root = Path(root)
    settings = {"roll_messages": 200, "roll_interval": "200ms"} if staging is None else staging
    cfg = {
        "name": name,
        "sources": source if isinstance(source, list) else [source],
        "schema": schema,
        "sinks": [files_sink(root)] if sinks is None else sinks,
        "checkpoint": str(root / "checkpoint"),
        "state": {"path": str(root / "state")},
        "staging": {"dir": str(root / "staging"), **settings},
        "trigger": {"mode": "available_now", "idle_rounds": 1},
        "spark": {"master": "local[2]", "log_level": "ERROR"},
    }
    return cfg | over
