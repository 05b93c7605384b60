"""Command line entry: ``python -m ingest.run --config job.yaml`` (also the spark-submit script)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

if __package__ in (None, ""):
    # Run as a file (spark-submit ingest/run.py): make the project's packages importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ingest.config import load_config
from ingest.delivery.messages import StartLogCapture
from ingest.errors import ConfigError, IngestError, redact


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("py4j").setLevel(logging.WARNING)


_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _check(cfg) -> int:
    from ingest.check import check_job
    from ingest.spark import make_session

    spark = make_session("local[1]", f"{cfg.name}-check", {}, "ERROR")
    try:
        columns = check_job(cfg, spark)
    finally:
        spark.stop()
    print(f"ok: job {cfg.name} is valid; its sinks receive columns {columns}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ingest.run", description=__doc__)
    parser.add_argument("--config", required=True, help="job YAML file")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=_LEVELS)
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the job (config, schema DDL, transform) on a local Spark session and exit 0 or 2; "
        "touches no queue, sink or state",
    )
    args = parser.parse_args(argv)
    _setup_logging(args.log_level)
    # The start log (job event delivery) begins before the config is read.
    capture = StartLogCapture()
    logging.getLogger().addHandler(capture)
    try:
        logging.getLogger("ingest.run").info("loading config %s", args.config)
        cfg = load_config(args.config)
        if args.check:
            return _check(cfg)
        from ingest.pipeline import Job

        job = Job(cfg, echo=lambda text: print(redact(text), flush=True), start_log=capture)
    except IngestError as err:
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    if cfg.delivery is None or not cfg.delivery.enabled:
        logging.getLogger().removeHandler(capture)
        capture.stop()

    def on_signal(signum, frame):
        if job.stop_requested.is_set():
            # Second signal: abort now. Unacked messages come back after their visibility timeout.
            os._exit(130)
        print(f"signal {signum}: stopping after the running batch (again to abort)", flush=True)
        job.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return job.run()
    except ConfigError as err:  # found once Spark could parse the schema or the transform
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 2
    except IngestError as err:
        print(f"error: {redact(str(err))}", file=sys.stderr)
        return 1
    except Exception as err:
        print(f"error: {redact(f'{type(err).__name__}: {err}')}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
