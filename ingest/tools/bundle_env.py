"""The spark-submit bundle's environment archive: venv-pack of the runtime dependency closure.

``pack_env`` packs the current venv into a ``.tar.gz`` for ``--archives``. What it leaves out,
and why:
  * the project itself. It is usually installed editable (``pip install -e``), which venv-pack
    cannot pack: the install is a ``.pth`` hook pointing at this checkout, so a packed hook
    would import the submitting machine's source tree on executors (or nothing at all on
    another machine). The packages ship as the code zip instead (``ingest.tools.bundle``), built
    from the same tree the driver runs, so driver and executors always run the same code.
  * distributions outside the runtime dependency closure of ``mq-ingest`` and its connector
    extras (pytest, moto, ruff, venv-pack, pip, MkDocs, ...), found from the installed metadata.
  * ``pyspark/jars``: the cluster's executors run on their own Spark installation; Python
    workers need pyspark's Python code only (it must be the cluster's Spark version).

The archive's ``bin/python`` is a symlink to the interpreter the venv was made from (venv-pack
does not ship CPython): every node needs that Python at the same path. The archive is rebuilt
only when the set of packed distributions changes (a fingerprint file sits beside it).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import os
import re
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

PROJECT = "mq-ingest"
ROOT = Path(__file__).resolve().parents[2]
_FORMAT = 2  # bump when the packing rules change, so cached archives are rebuilt


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


TOOL_EXTRAS = frozenset({"dev", "docs"})
"""Extras for working on the project (tests, the docs site), never needed by a job: ``docs`` alone
put ~17,000 files of MkDocs and its theme into every archive, half of what each node unpacks."""


def default_extras(dists: dict[str, md.Distribution]) -> set[str]:
    """The project's extras whose distributions are all installed, except ``TOOL_EXTRAS``."""
    from packaging.requirements import Requirement

    project = dists.get(_norm(PROJECT))
    if project is None:
        return set()
    extras = set(project.metadata.get_all("Provides-Extra") or []) - TOOL_EXTRAS
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


_WRITING = re.compile(r"\.pyc\.\d+$")
"""A ``.pyc`` an import elsewhere is writing (``importlib``'s temporary name, renamed once written):
listed with the venv, it could be gone by the time it is packed (a clean run's cluster tests failed so)."""


def _dropped(target: str, drop: set[str]) -> bool:
    if target in drop or _WRITING.search(target):
        return True
    parts = target.split("/")
    return any("/".join(parts[:i]) in drop for i in range(1, len(parts)))
