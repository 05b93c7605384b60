"""Builds the spark-submit bundle: the packed virtual environment plus a zip of the project's packages.

``python -m ingest.tools.bundle --out dist/`` writes ``dist/mq-ingest-env.tar.gz`` (venv-pack of the
current venv's runtime dependencies, ``ingest.tools.bundle_env`` says what it leaves out and why) and
``dist/mq_ingest.zip`` (``ingest``, ``sources``, ``sinks``, ``checkpoints``; the
development-only emulators live in ``tests/``) and prints the spark-submit command line that
ships them: the archive with ``--archives`` (unpacked as ``./environment`` on every executor),
the zip with ``--py-files``.

The archive's ``bin/python`` is a symlink to the interpreter the venv was made from: every node
needs that Python at the same path, see ``--python-prefix``. The archive is rebuilt only when
the set of packed distributions changes; ``--force`` rebuilds anyway. The zip is rebuilt every
time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
import zipfile
from pathlib import Path

from ingest.tools.bundle_env import ROOT, pack_env

PACKAGES = ("ingest", "sources", "sinks", "checkpoints")
ENV_ARCHIVE = "mq-ingest-env.tar.gz"
CODE_ZIP = "mq_ingest.zip"
ENV_ALIAS = "environment"


def _shipped(path: Path) -> bool:
    return path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"


def zip_project(out: Path, root: Path = ROOT) -> Path:
    """Zip the project packages (sources only, no bytecode) for ``--py-files``."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*")):
                if _shipped(path):
                    zf.write(path, path.relative_to(root).as_posix())
    os.replace(tmp, out)
    return out


def spark_submit_path() -> str:
    """bin/spark-submit of the pyspark installed in this interpreter."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed in this interpreter")
    return str(Path(spec.origin).parent / "bin" / "spark-submit")


def submit_command(
    env_archive: Path,
    code_zip: Path,
    config: str,
    master: str = "spark://HOST:7077",
    driver_python: str = sys.executable,
    conf: dict[str, str] | None = None,
    s3a: bool = False,
) -> list[str]:
    """The spark-submit argv that runs ``ingest/run.py --config <config>`` with the bundle.

    Args:
        env_archive: the packed venv; unpacked as ``./environment`` beside every executor.
        code_zip: the project packages, on the driver's and executors' ``sys.path``.
        config: the job YAML (a path the driver machine can read).
        master: the master URL; the job config's ``spark.master`` must be empty to use it.
        driver_python: the driver's interpreter (client mode: a venv on the submitting machine).
        conf: more ``--conf`` settings.
        s3a: carry Hadoop's S3A (``ingest.runtime.s3a.submit_args``: ``--packages``, resolved
            from the jar cache without a network once fetched) for ``s3a://`` paths.

    Returns:
        The argv list.
    """
    cmd = [spark_submit_path(), "--master", master]
    cmd += ["--archives", f"{Path(env_archive).resolve()}#{ENV_ALIAS}"]
    cmd += ["--py-files", str(Path(code_zip).resolve())]
    if s3a:
        from ingest.runtime.s3a import submit_args

        cmd += submit_args()
    settings = {
        "spark.pyspark.python": f"./{ENV_ALIAS}/bin/python",
        "spark.pyspark.driver.python": driver_python,
        **(conf or {}),
    }
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(ROOT / "ingest" / "run.py"), "--config", config]


def build(out_dir: Path, python_prefix: str | None = None, force: bool = False) -> tuple[Path, Path, bool]:
    """Build both parts into ``out_dir``; returns (env archive, code zip, whether the archive was rebuilt)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env, rebuilt = pack_env(out_dir / ENV_ARCHIVE, python_prefix=python_prefix, force=force)
    return env, zip_project(out_dir / CODE_ZIP), rebuilt


def main(argv: list[str] | None = None) -> int:
    """``python -m ingest.tools.bundle --out dist/``: build the bundle, print the spark-submit command."""
    parser = argparse.ArgumentParser(
        prog="python -m ingest.tools.bundle", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", default="dist", help="output directory (default: dist)")
    parser.add_argument("--master", default="spark://HOST:7077", help="master URL for the printed command")
    parser.add_argument("--config", default="job.yaml", help="job YAML for the printed command")
    parser.add_argument(
        "--python-prefix",
        help="where the nodes have the base Python (default: where this venv's Python is, "
        + os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
        + ")",
    )
    parser.add_argument("--force", action="store_true", help="repack the env even if it is up to date")
    parser.add_argument(
        "--s3a", action="store_true", help="the job has s3a:// paths: the command carries S3A's jars"
    )
    args = parser.parse_args(argv)
    if sys.prefix == sys.base_prefix:
        print("error: run this with the project's virtual environment's python", file=sys.stderr)
        return 2
    try:
        env, code, rebuilt = build(Path(args.out), args.python_prefix, args.force)
    except Exception as err:  # venv-pack's refusals, a project not installed, disk errors
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    size = env.stat().st_size / 2**20
    print(f"{'built' if rebuilt else 'up to date'}: {env} ({size:.0f} MiB)", file=sys.stderr)
    print(f"built: {code} ({code.stat().st_size / 2**10:.0f} KiB)", file=sys.stderr)
    if not args.s3a:
        print("for s3a:// paths: --s3a (adds S3A's jars: --packages, from the jar cache)", file=sys.stderr)
    print(shlex.join(submit_command(env, code, args.config, args.master, s3a=args.s3a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
