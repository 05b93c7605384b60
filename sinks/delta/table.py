"""Delta sink, driver side: open or create the table, evolve its schema, commit, merge, maintain."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa

from ingest.errors import FatalError, TransientError, call_with_retries, redact
from ingest.storage.aws import delta_options
from ingest.storage.location import delta_url, is_object_url
from sinks.delta.config import DeltaSinkConfig
from sinks.delta.errors import store_error
from sinks.delta.files import is_local, local_path

log = logging.getLogger(__name__)
T = TypeVar("T")
_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _classified(what: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Raise a ``DeltaTarget`` method's object-store ``OSError`` as :func:`store_error` does."""

    def wrap(method: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(method)
        def classified(self: DeltaTarget, *args: Any, **kwargs: Any) -> T:
            try:
                return method(self, *args, **kwargs)
            except OSError as err:
                raise store_error(f"{self.key}.path", f"{what} {redact(self.cfg.path)}", err) from None

        return classified

    return wrap


class DeltaTarget:
    """The sink's table, opened lazily on the driver; every commit carries ``(app_id, batch_id)``.

    A commit is checked against the table's app transaction version first and again after a
    failure (delta-rs accepts a stale version without error, and a commit can land although the
    call raised). A commit that lost to a concurrent writer is retried ``commit_retries`` times,
    then the batch fails with a ``FatalError``. An object-store error (the store unreachable,
    credentials refused) raises ``TransientError`` or ``FatalError`` naming ``sinks.<name>.path``.
    """

    def __init__(self, cfg: DeltaSinkConfig) -> None:
        self.cfg = cfg
        self.uri = local_path(cfg.path) if is_local(cfg.path) else delta_url(cfg.path)
        self.app_id = cfg.app_id or cfg.name
        self.key = f"sinks.{cfg.name}"
        self._dt: Any = None
        self._options: dict[str, str] | None = None

    @property
    def options(self) -> dict[str, str]:
        """delta-rs storage options: on S3, the standard AWS settings under the sink's own
        ``storage_options`` (``delta_options``), so none are needed where those are set; elsewhere
        the sink's. Resolved once; the secrets among them are masked in logs and errors."""
        if self._options is None:
            given = dict(self.cfg.storage_options)
            self._options = delta_options(given) if is_object_url(self.cfg.path) else given
            redact.add(v for k, v in self._options.items() if k in _SECRETS)
        return self._options

    @_classified("open the table at")
    def table(self, schema: pa.Schema | None = None) -> Any:
        """The table, refreshed; created from ``schema`` if missing (None if missing and no schema)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        if self._dt is not None:
            self._dt.update_incremental()
            return self._dt
        options = self.options or None
        try:
            # Opened, not probed with DeltaTable.is_deltatable: that one holds the GIL through its
            # object-store calls (retries included), stalling the driver's other threads.
            self._dt = DeltaTable(self.uri, storage_options=options)
        except TableNotFoundError:
            if schema is None:
                return None
            self._dt = self._guard(
                "create the table",
                lambda: DeltaTable.create(
                    self.uri,
                    schema,
                    mode="ignore",
                    partition_by=list(self.cfg.partition_by) or None,
                    configuration=dict(self.cfg.configuration) or None,
                    storage_options=options,
                ),
            )
        self._check_layout(self._dt)
        return self._dt

    @_classified("read the table at")
    def committed(self) -> int:
        """The last batch id the table holds for this sink's app id, -1 if none."""
        dt = self.table()
        version = None if dt is None else dt.transaction_version(self.app_id)
        return -1 if version is None else int(version)

    @_classified("evolve the schema of")
    def evolve(self, schema: pa.Schema) -> None:
        """Bring the table's schema to hold ``schema``'s columns (``schema_mode: merge``), or fail."""
        from deltalake import Schema

        dt = self.table(schema)
        have = {f.name: f for f in dt.schema().fields}
        new = []
        for f in Schema.from_arrow(schema).fields:
            if f.name not in have:
                new.append(f)
            elif _kind(f) != _kind(have[f.name]):
                if isinstance(have[f.name].type, type(f.type)) and hasattr(f.type, "fields"):
                    new.append(f)  # a struct with fields the table lacks
                    continue
                raise FatalError(
                    f"{self.key}: column {f.name} is {_kind(f)} in the batch but {_kind(have[f.name])} "
                    f"in the table {redact(self.cfg.path)}"
                )
        if not new:
            return
        names = [f.name for f in new]
        if self.cfg.schema_mode != "merge":
            raise FatalError(
                f"{self.key}.schema_mode: the batch has columns the table lacks {names}; "
                "set schema_mode: merge to add them"
            )
        log.info("delta sink %s: adding column(s) %s", self.cfg.name, names)
        self._guard("add columns", lambda: self.table().alter.add_columns(new))

    @_classified("commit to")
    def commit(self, actions: list[dict], batch_id: int) -> bool:
        """Commit the add actions of ``batch_id`` in one transaction; False if the table already had it."""
        from deltalake import CommitProperties, Transaction
        from deltalake.transaction import AddAction

        adds = [
            AddAction(
                a["path"],
                a["size"],
                json.loads(a["partition_values"]),
                a["modification_time"],
                True,
                a["stats"],
            )
            for a in actions
        ]
        txn = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])

        def once() -> bool:
            if self.committed() >= batch_id:
                return False
            dt = self.table()
            dt.create_write_transaction(
                adds, "append", dt.schema(), list(dt.metadata().partition_columns), commit_properties=txn
            )
            return True

        return self._landed(batch_id, lambda: self._guard(f"commit batch {batch_id}", once))

    @_classified("merge into")
    def merge(self, data: pa.Table, batch_id: int) -> bool:
        """Upsert ``data`` (one row per key) on ``merge_keys`` in one transaction; False if already in."""
        from deltalake import CommitProperties, Transaction

        txn = CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)])
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in self.cfg.merge_keys)

        def once() -> bool:
            if self.committed() >= batch_id:
                return False
            merger = self.table().merge(
                data,
                on,
                source_alias="s",
                target_alias="t",
                merge_schema=self.cfg.schema_mode == "merge",
                commit_properties=txn,
            )
            merger.when_matched_update_all().when_not_matched_insert_all().execute()
            return True

        return self._landed(batch_id, lambda: self._guard(f"merge batch {batch_id}", once))

    @_classified("maintain")
    def maintain(self) -> dict[str, int]:
        """Compact small files (``optimize``) and vacuum unreferenced ones older than ``vacuum_retention``,
        files of batches that failed before their commit included (``full``)."""
        out = {"files_compacted": 0, "files_vacuumed": 0}
        if self.table() is None:
            return out
        if self.cfg.optimize:
            done = self._guard(
                "compact", lambda: self.table().optimize.compact(target_size=self.cfg.target_file_size)
            )
            out["files_compacted"] = int(done.get("numFilesRemoved", 0))
        if self.cfg.vacuum_retention is not None:
            hours = int(self.cfg.vacuum_retention // 3600)
            gone = self._guard(
                "vacuum",
                lambda: self.table().vacuum(
                    retention_hours=hours, dry_run=False, enforce_retention_duration=False, full=True
                ),
            )
            out["files_vacuumed"] = len(gone)
        log.info("delta sink %s maintained: %s", self.cfg.name, out)
        return out

    def discard(self, paths: list[str]) -> None:
        """Best effort: delete files a failed batch wrote (the vacuum takes what this misses)."""
        from deltalake.fs import DeltaStorageHandler

        try:
            handler = DeltaStorageHandler(self.uri, self.options or None)
            for path in paths:
                handler.delete_file(path)
        except Exception as err:
            log.warning(
                "delta sink %s: could not delete a failed batch's files: %s", self.cfg.name, redact(str(err))
            )

    def _landed(self, batch_id: int, commit: Callable[[], bool]) -> bool:
        try:
            return commit()
        except BaseException:
            self._dt = None  # reopened: the commit may have landed before the error
            if self.committed() == batch_id:
                log.warning(
                    "delta sink %s: batch %d committed, but delta-rs raised afterwards",
                    self.cfg.name,
                    batch_id,
                )
                return True
            raise

    def _guard(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` with a lost race to a concurrent writer retried; fatal once the retries are spent."""
        from deltalake.exceptions import CommitFailedError

        def attempt() -> T:
            try:
                return fn()
            except CommitFailedError as err:
                if self._dt is not None:
                    self._dt.update_incremental()
                raise TransientError(redact(f"{self.key}: {what}: {err}")) from None

        try:
            return call_with_retries(
                attempt, what=f"{self.key}: {what}", attempts=self.cfg.commit_retries + 1
            )
        except TransientError as err:
            raise FatalError(
                f"{err} (a concurrent writer; {self.cfg.commit_retries} retries spent)"
            ) from None

    def _check_layout(self, dt: Any) -> None:
        have = list(dt.metadata().partition_columns)
        if self.cfg.partition_by and have != list(self.cfg.partition_by):
            raise FatalError(
                f"{self.key}.partition_by: the table {redact(self.cfg.path)} is partitioned by {have}, "
                f"not {list(self.cfg.partition_by)}"
            )
        props = dt.metadata().configuration
        changed = {k: v for k, v in self.cfg.configuration.items() if props.get(k) != v}
        if changed:
            self._guard("set table properties", lambda: dt.alter.set_table_properties(changed))


def _kind(field: Any) -> str:
    """A Delta field's type, for comparison (nullability and metadata aside)."""
    return json.dumps(json.loads(field.to_json())["type"], sort_keys=True)
