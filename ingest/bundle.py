"""Builds the spark-submit bundle: the packed virtual environment plus a zip of the project's packages.

``python -m ingest.bundle --out dist/`` writes ``dist/mq-ingest-env.tar.gz`` (venv-pack of the
current venv) and ``dist/mq_ingest.zip`` (``ingest``, ``sources``, ``sinks``, ``checkpoints``;
the development-only emulators live in ``tests/``) and prints the spark-submit command line
that ships them: the archive with ``--archives`` (unpacked as ``./environment`` on every
executor), the zip with ``--py-files``.

What the archive leaves out, and why:
  * the project itself. It is usually installed editable (``pip install -e``), which venv-pack
    cannot pack: the install is a ``.pth`` hook pointing at this checkout, so a packed hook
    would import the submitting machine's source tree on executors (or nothing at all on
    another machine). The packages ship as the zip instead, built from the same tree the
    driver runs, so driver and executors always run the same code.
  * distributions outside the runtime dependency closure of ``mq-ingest`` (pytest, moto,
    ruff, venv-pack, pip, ...), found from the installed metadata.
  * ``pyspark/jars``: the cluster's executors run on their own Spark installation; Python
    workers need pyspark's Python code only (it must be the cluster's Spark version).

The archive's ``bin/python`` is a symlink to the interpreter the venv was made from (venv-pack
does not ship CPython): every node needs that Python at the same path, see ``--python-prefix``.
The archive is rebuilt only when the set of packed distributions changes (a fingerprint file
sits beside it); ``--force`` rebuilds anyway. The zip is rebuilt every time.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata as md
import importlib.util
import os
import re
import shlex
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

PROJECT = "mq-ingest"
PACKAGES = ("ingest", "sources", "sinks", "checkpoints")
ENV_ARCHIVE = "mq-ingest-env.tar.gz"
CODE_ZIP = "mq_ingest.zip"
ENV_ALIAS = "environment"
ROOT = Path(__file__).resolve().parents[1]
_FORMAT = 1  # bump when the packing rules change, so cached archives are rebuilt


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _site_packages(prefix: str) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": prefix, "platbase": prefix}))


def installed(prefix: str = sys.prefix) -> dict[str, md.Distribution]:
    """The distributions installed in the venv at ``prefix``, by normalized name."""
    dists = md.distributions(path=[str(_site_packages(prefix))])
    return {_norm(d.metadata["Name"]): d for d in dists}


def runtime_closure(dists: dict[str, md.Distribution], extras: set[str]) -> set[str]:
    """Names of the distributions ``mq-ingest`` (with ``extras``) needs at run time, recursively."""
    from packaging.requirements import Requirement

    want = [(_norm(PROJECT), frozenset(extras))]
    seen: dict[str, set[str]] = {}
    while want:
        name, asked = want.pop()
        if name not in dists or (name in seen and asked <= seen[name]):
            continue
        seen.setdefault(name, set()).update(asked)
        for line in dists[name].requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in ("", *seen[name])]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                want.append((_norm(req.name), frozenset(req.extras)))
    seen.pop(_norm(PROJECT), None)
    return set(seen)


def default_extras(dists: dict[str, md.Distribution]) -> set[str]:
    """The project's extras whose distributions are all installed, except ``dev``."""
    from packaging.requirements import Requirement

    project = dists.get(_norm(PROJECT))
    if project is None:
        return set()
    extras = set(project.metadata.get_all("Provides-Extra") or []) - {"dev"}
    out = set()
    for extra in extras:
        reqs = [Requirement(r) for r in project.requires or []]
        needed = [r for r in reqs if r.marker is not None and r.marker.evaluate({"extra": extra})]
        if needed and all(_norm(r.name) in dists for r in needed):
            out.add(extra)
    return out


def _owned_files(dist: md.Distribution, prefix: Path) -> set[str]:
    """The dist's files (from RECORD) as paths relative to the venv ``prefix``."""
    out = set()
    for f in dist.files or []:
        path = Path(os.path.normpath(str(dist.locate_file(f))))
        with contextlib.suppress(ValueError):
            out.add(str(path.relative_to(prefix)))
    return out


def _points_at_project(pth_line: str, site: Path) -> bool:
    line = pth_line.strip()
    return bool(line) and not line.startswith(("#", "import")) and os.path.normpath(site / line) == str(ROOT)


def plan(prefix: str = sys.prefix, extras: set[str] | None = None) -> tuple[list[str], set[str]]:
    """What to pack: (sorted ``name==version`` kept, prefix-relative paths and dirs to leave out)."""
    root = Path(os.path.abspath(prefix))
    dists = installed(prefix)
    if _norm(PROJECT) not in dists:
        raise RuntimeError(f"{PROJECT} is not installed in {prefix}: run `pip install -e .` there first")
    keep = runtime_closure(dists, default_extras(dists) if extras is None else extras)
    site_dir = Path(os.path.abspath(_site_packages(prefix)))
    site = str(site_dir.relative_to(root))
    drop: set[str] = {f"{site}/pyspark/jars"}
    kept_tops = set()
    for name in keep:
        kept_tops |= {p.split("/")[3] for p in _owned_files(dists[name], root) if p.startswith(site + "/")}
    for name, dist in dists.items():
        if name in keep:
            continue
        files = _owned_files(dist, root)  # the project's own: its editable hook and dist-info
        drop |= files
        for p in files:  # whole package dirs (bytecode is not always in RECORD) unless shared
            parts = p.split("/")
            if p.startswith(site + "/") and len(parts) > 4 and parts[3] not in kept_tops:
                drop.add("/".join(parts[:4]))
    for pth in site_dir.glob("*.pth"):  # a legacy (path) editable install of the project
        if any(_points_at_project(line, site_dir) for line in pth.read_text(errors="replace").splitlines()):
            drop.add(f"{site}/{pth.name}")
    return sorted(f"{n}=={dists[n].version}" for n in keep), drop


def fingerprint(kept: list[str], python_prefix: str | None) -> str:
    """Identifies an env archive: packed distributions, interpreter, packing rules."""
    text = "\n".join([str(_FORMAT), sys.version, sys.prefix, str(python_prefix), *kept])
    return hashlib.sha256(text.encode()).hexdigest()


@contextlib.contextmanager
def _allow_project_editable() -> Iterator[None]:
    """venv-pack refuses any editable install; let the project's own pass (it ships as the zip)."""
    import venv_pack.core as core

    original = core.check_no_editable_packages

    def check(context) -> None:
        try:
            original(context)
        except core.VenvPackException as err:
            listed = re.findall(r"^- (.+)$", str(err), re.M)
            site = os.path.join(context.prefix, context.py_lib, "site-packages")
            others = [p for p in listed if os.path.normpath(os.path.join(site, p)) != str(ROOT)]
            if others:
                raise core.VenvPackException(
                    "editable installs other than mq-ingest cannot ship to executors: " + ", ".join(others)
                ) from None

    core.check_no_editable_packages = check
    try:
        yield
    finally:
        core.check_no_editable_packages = original


def pack_env(
    out: Path, prefix: str = sys.prefix, python_prefix: str | None = None, force: bool = False
) -> tuple[Path, bool]:
    """Pack the venv into ``out`` unless an archive with the same fingerprint is there.

    Returns:
        The archive path, and whether it was (re)built.
    """
    import venv_pack

    kept, drop = plan(prefix)
    stamp = out.with_name(out.name + ".fingerprint")
    digest = fingerprint(kept, python_prefix)
    if not force and out.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return out, False
    with _allow_project_editable():
        env = venv_pack.Env(prefix)
    env.files = [f for f in env.files if not _dropped(f.target, drop)]
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")  # concurrent builds never mix
    env.pack(output=str(tmp), format="tar.gz", python_prefix=python_prefix, compress_level=1, force=True)
    os.chmod(tmp, 0o644)  # venv-pack writes through mkstemp (0600); other users submit too
    os.replace(tmp, out)
    stamp.write_text(digest + "\n")
    return out, True


def _dropped(target: str, drop: set[str]) -> bool:
    if target in drop:
        return True
    parts = target.split("/")
    return any("/".join(parts[:i]) in drop for i in range(1, len(parts)))


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
) -> list[str]:
    """The spark-submit argv that runs ``ingest/run.py --config <config>`` with the bundle.

    Args:
        env_archive: the packed venv; unpacked as ``./environment`` beside every executor.
        code_zip: the project packages, on the driver's and executors' ``sys.path``.
        config: the job YAML (a path the driver machine can read).
        master: the master URL; the job config's ``spark.master`` must be empty to use it.
        driver_python: the driver's interpreter (client mode: a venv on the submitting machine).
        conf: more ``--conf`` settings.

    Returns:
        The argv list.
    """
    cmd = [spark_submit_path(), "--master", master]
    cmd += ["--archives", f"{Path(env_archive).resolve()}#{ENV_ALIAS}"]
    cmd += ["--py-files", str(Path(code_zip).resolve())]
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
    """``python -m ingest.bundle --out dist/``: build the bundle, print the spark-submit command."""
    parser = argparse.ArgumentParser(prog="python -m ingest.bundle", description=__doc__.splitlines()[0])
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
    print(shlex.join(submit_command(env, code, args.config, args.master)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
