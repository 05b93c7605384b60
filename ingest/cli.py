"""The ``mq-ingest`` console command: ``run``, ``intake``, ``check``, ``fakeq`` over the module entry points.

Examples:
    mq-ingest run --config job.yaml
    mq-ingest intake --config job.yaml
    mq-ingest run --sql job.sql
    mq-ingest check --config job.yaml
    mq-ingest fakeq --path data/queues --queue events count

Each subcommand takes the flags of the module it stands for (``python -m ingest.run``,
``python -m ingest.fakeq``), which keep working as they are; ``check`` is ``run … --check``,
``intake`` is ``run … --intake``.
"""

from __future__ import annotations

import sys
from importlib import metadata

USAGE = """usage: mq-ingest [--version] COMMAND [ARGS...]

commands:
  run     run a job: --config job.yaml or --sql job.sql (python -m ingest.run)
  intake  run an intake worker of a job whose intake.mode is workers: receivers, staging, leases
          and deletes, no Spark; any number, on any node (run ... --intake)
  check   validate a job before its first batch, writing to no queue, sink or state (a sink that
          checks its target, a table, compares it with its columns if reachable); exit 0 or 2
          (run ... --check)
  fakeq   send, peek, count and purge a local fake queue (python -m ingest.fakeq)

`mq-ingest COMMAND --help` lists a command's flags.
"""


def _version() -> str:
    try:
        return metadata.version("mq-ingest")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``mq-ingest COMMAND ARGS`` to the module entry point; returns its exit code.

    Args:
        argv: The arguments after the program name; default ``sys.argv[1:]``.

    Returns:
        The command's exit code (``run``: 0 done, 1 failed, 2 invalid config, 3 acks left), or 2
        for an unknown command.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "--version":
        print(f"mq-ingest {_version()}")
        return 0
    if command in ("run", "check", "intake"):
        from ingest import run

        if command != "run" and f"--{command}" not in rest:
            rest.append(f"--{command}")
        return run.main(rest, prog=f"mq-ingest {command}")
    if command == "fakeq":
        from ingest.tools import fakeq

        return fakeq.main(rest, prog="mq-ingest fakeq")
    sys.stderr.write(USAGE)
    print(f"mq-ingest: error: unknown command {command!r} (run, intake, check, fakeq)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
