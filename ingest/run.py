"""Command line entry: ``python -m ingest.run --config job.yaml`` or ``--sql job.sql`` (also the
spark-submit script)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

if __package__ in (None, ""):
    # Run as a file (spark-submit ingest/run.py): make the project's packages importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ingest.config import load_config, parse_config
from ingest.errors import ConfigError, IngestError, NothingToRun, describe, redact
from ingest.runtime.console import TRACE_ONLY, setup_logging
from ingest.runtime.memory import cap_arenas

_log = logging.getLogger("ingest.run")
_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _located(err: Exception, script) -> str:
    """The error's text; an error in a sink's transform placed at its INSERT in the script."""
    return script.locate(str(err)) if script is not None else str(err)


def _check(cfg, args: argparse.Namespace) -> int:
    """``check``: 0 valid, else 2 with one ``error:`` line, as a run's (the trace at DEBUG)."""
    try:
        return _checked(cfg, args)
    except IngestError:
        raise
    except Exception as err:
        _log.error("the check failed", exc_info=True, extra={TRACE_ONLY: True})
        print(f"error: {redact(describe(err))}", file=sys.stderr)
        return 2


def _checked(cfg, args: argparse.Namespace) -> int:
    from ingest.batch.check import check_job
    from ingest.batch.deadletter import DeadLetter
    from ingest.config.registry import build_sink
    from ingest.intake.processes import make_source
    from ingest.intake.recovery import check_owners
    from ingest.runtime.spark import connector_conf, make_session

    # Built as the run builds them (their clients are made lazily: no queue is touched; a sink
    # with ``check_target`` compares its target, a database table, with its columns if reachable).
    sources = {source.name: make_source(source) for source in cfg.sources}
    check_owners(cfg, sources)  # the checkpoint's and the state table's, as the run checks them
    sinks = {sink.name: build_sink(sink) for sink in cfg.data_sinks}
    DeadLetter.of(cfg)
    from pyspark import SparkContext

    running = SparkContext._active_spark_context  # a caller's session (in-process) is left running
    spark = make_session("local[1]", f"{cfg.name}-check", connector_conf({}, cfg.sinks), "ERROR")
    try:
        columns = check_job(cfg, spark, sinks)
    finally:
        for sink in sinks.values():
            sink.close()
        if running is None:
            spark.stop()
    received = "; ".join(f"sink {name} receives columns {cols}" for name, cols in columns.items())
    print(f"ok: job {cfg.name} is valid; {received}")
    for line in guarantees(cfg):
        print(line)
    if (workers := workers_line(cfg, args)) is not None:
        print(workers)
    return 0


def guarantees(cfg) -> list[str]:
    """``check``'s line per sink: the delivery guarantee it keeps, as its config declares it
    (``SinkDelivery``, made stronger by the config: an SQS FIFO queue, a function's ``guarantee``)."""
    from ingest.config.connector import GUARANTEES

    return [f"sink {sink.name} ({sink.type}): {GUARANTEES[sink.guarantee]}" for sink in cfg.sinks]


def workers_line(cfg, args: argparse.Namespace) -> str | None:
    """``check``'s line for a job whose ``intake.mode`` is ``workers`` (it receives nothing itself):
    the command that starts its intake workers, with the job as it was given; else None."""
    if cfg.intake.mode != "workers":
        return None
    given = f"--config {args.config}" if args.config else f"--sql {args.sql}"
    if args.settings:
        given += f" --settings {args.settings}"
    return (
        "intake.mode is workers: the job runs no receivers; start intake workers with "
        f"`mq-ingest intake {given}` on nodes that reach staging.dir {cfg.staging.dir}"
    )


def _reloader(args: argparse.Namespace):
    """Re-reads the job's config from where it came (delivery settings may change while it runs)."""
    if args.config:
        return lambda: load_config(args.config)

    def from_script():
        from ingest.flinksql import load_sql

        return parse_config(load_sql(args.sql, args.settings).config, args.sql)

    return from_script


def _load(args: argparse.Namespace):
    """The validated job config, and the script it came from (None for YAML)."""
    if args.config:
        _log.info("loading config %s", args.config)
        return load_config(args.config), None
    from ingest.flinksql import load_sql

    _log.info("loading SQL script %s", args.sql)
    script = load_sql(args.sql, args.settings)
    if args.print_config:
        script.check(args.sql)
        return None, script
    return parse_config(script.config, args.sql), script


def main(argv: list[str] | None = None, prog: str = "python -m ingest.run") -> int:
    """Run the command line; returns the exit code (0 done, 1 failed, 2 invalid config, 3 acks left).

    Args:
        argv: The arguments; default ``sys.argv[1:]``.
        prog: The program name in usage and help (``mq-ingest run`` from the console command).
    """
    cap_arenas()  # first: glibc fixes the arena limit when a second arena is made
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--config", help="job YAML file")
    given.add_argument("--sql", help="Flink SQL script: CREATE TABLE … WITH (…) and INSERT INTO … SELECT …")
    parser.add_argument(
        "--settings", help="with --sql: job settings YAML (default: <script>.settings.yaml if it exists)"
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="with --sql: print the job as YAML (secrets masked) and exit",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=_LEVELS,
        help="DEBUG is for mq-ingest's own loggers; other libraries' stay at INFO (see --debug-logger)",
    )
    parser.add_argument(
        "--debug-logger",
        action="append",
        default=[],
        metavar="NAME",
        help="also log this library's logger at DEBUG (botocore, urllib3…; botocore's DEBUG lines carry "
        "the access key id and request signatures); may be given again",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the job (config, schema DDL, transform) on a local Spark session and exit 0 or 2; "
        "writes to no queue, sink or state (a sink that checks its target, a table, compares it with "
        "its columns if reachable)",
    )
    parser.add_argument(
        "--intake",
        action="store_true",
        help="run an intake worker of the job (intake.mode: workers): its receivers, staging, leases and "
        "deletes, no Spark; start any number, on any node that reaches staging.dir (mq-ingest intake)",
    )
    parser.add_argument("--worker-id", help="with --intake: the worker's id (default <host>-<pid>-<4 hex>)")
    parser.add_argument(
        "--port",
        type=int,
        help="with --intake: where /metrics and /healthz listen (0: any free one; default: none)",
    )
    args = parser.parse_args(argv)
    if (args.worker_id or args.port is not None) and not args.intake:
        parser.error("--worker-id and --port go with --intake")
    if (args.settings or args.print_config) and not args.sql:
        parser.error("--settings and --print-config go with --sql")
    setup_logging(args.log_level, args.debug_logger)
    # The start log (job event delivery) begins before the config is read.
    try:  # the connectors, the plugins' among them: one that cannot be loaded is one error line
        from ingest.ops.job_events.messages import StartLogCapture  # (it imports the config unions)
    except IngestError as err:
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    capture = StartLogCapture()
    logging.getLogger().addHandler(capture)
    script = None
    try:
        try:
            cfg, script = _load(args)
        except NothingToRun as done:  # a DDL-only script: every table checked, no job to start
            print(f"ok: {redact(str(done))}")
            return 0
        if cfg is None:
            print(script.to_yaml(), end="")
            return 0
        if args.check:
            return _check(cfg, args)
        echo = lambda text: print(redact(text), flush=True)  # noqa: E731
        job: Any
        if args.intake:
            from ingest.intake_worker import IntakeWorker

            job = IntakeWorker(cfg, args.worker_id, echo, args.port, capture, _reloader(args))
        else:
            from ingest.pipeline import Job

            job = Job(cfg, echo=echo, start_log=capture, reload=_reloader(args))
    except IngestError as err:
        print(f"error: {redact(_located(err, script))}", file=sys.stderr)
        return 2
    if cfg.delivery is None or not cfg.delivery.enabled:
        logging.getLogger().removeHandler(capture)
        capture.stop()

    def on_signal(signum, frame):
        if job.stop_requested.is_set():
            # Second signal: abort now. Unacked messages come back after their visibility timeout.
            from ingest.ops.summary import abort_line

            print(abort_line(job.inflight), file=sys.stderr, flush=True)
            os._exit(130)
        job.stop()  # before the line: a second signal that follows it at once aborts
        print(f"signal {signum}: stopping after the running batch (again to abort)", flush=True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return job.run()
    except Exception as err:
        # The trace for the start log (and the console at DEBUG); the console gets one line.
        _log.error("the job failed", exc_info=True, extra={TRACE_ONLY: True})
        if isinstance(err, ConfigError):  # found once Spark could parse the schema or the transform
            print(f"error: {redact(_located(err, script))}", file=sys.stderr)
            return 2
        text = str(err) if isinstance(err, IngestError) else describe(err)
        print(f"error: {redact(text)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
