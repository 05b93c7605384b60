"""Decodes staged message bodies into the job's schema and marks the rows that cannot be decoded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ingest.config.sources import DecodeOptions
from ingest.decode_binary import BINARY_FORMATS, ERROR, decode_binary
from ingest.envelope import FIELDS, FILE_COLUMN
from ingest.errors import ConfigError
from sinks.base import META

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_CORRUPT = "_corrupt_record"
_TIMESTAMP_FORMATS = {
    # ISO-8601: any number of fractional digits (Spark keeps microseconds) and the offsets
    # Z, +08, +0800 and +08:00, or none (the session's time zone).
    "ISO-8601": "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][XXX][XX][X]",
    "SQL": "yyyy-MM-dd HH:mm:ss[.SSS][.SS][.S]",
}
SUPPORTED_FORMATS = ("json", "csv", "raw", *BINARY_FORMATS)


def check_supported(
    name: str, opts: DecodeOptions, body_schema: str | None, spark_ready: bool = False
) -> None:
    """Fail at start, naming the key, for options this build cannot decode.

    The schema's DDL is parsed only once a SparkSession exists (``spark_ready``).
    """
    if opts.format not in SUPPORTED_FORMATS:
        raise ConfigError(
            f"config key sources.{name}.format: {opts.format!r} is not supported yet; "
            f"use one of {list(SUPPORTED_FORMATS)}"
        )
    if opts.message_type == "OSS":
        try:
            import ingest.oss_events  # noqa: F401
        except ImportError:
            raise ConfigError(f"config key sources.{name}.messageType: OSS is not available") from None
    if body_schema and spark_ready:
        from pyspark.sql.types import StructType

        try:
            StructType.fromDDL(body_schema)
        except Exception as err:
            raise ConfigError(f"config key schema: invalid Spark DDL {body_schema!r}: {err}") from None


def meta_column(df: DataFrame) -> Column:
    """The envelope (and the staged file) as one ``_meta`` struct."""
    from pyspark.sql import functions as F

    names = [n for n, _ in FIELDS] + ([FILE_COLUMN] if FILE_COLUMN in df.columns else [])
    return F.struct(*[F.col(n) for n in names]).alias(META)


def _body_text(df: DataFrame) -> Column:
    from pyspark.sql import functions as F

    return F.when(F.col("body_base64"), F.unbase64("body").cast("string")).otherwise(F.col("body"))


def decode(df: DataFrame, opts: DecodeOptions, body_schema: str | None, carry: list[str] = ()) -> DataFrame:
    """Envelope rows → the schema's columns, ``_meta``, ``_error`` and the ``carry`` columns as they are.

    json: ``from_json`` in PERMISSIVE mode; a blank body is an error; a JSON value that
    is not an object, malformed JSON, a value of the wrong type, an unparsable timestamp or a
    null in a ``NOT NULL`` schema field is an error, unless ``json.ignore-parse-errors``
    (then the fields are null, as Flink's option does). ``json.fail-on-missing-field``
    makes a body lacking a schema field an error. csv: ``from_csv`` likewise. raw: the body
    as a single column (named by a one-column schema, ``body`` otherwise). avro, parquet,
    orc: each (base64) body is one record set, giving one row per record
    (:mod:`ingest.decode_binary`).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    text = _body_text(df)
    meta = meta_column(df)
    kept = [F.col(c) for c in carry]
    if opts.message_type == "OSS":
        from ingest.oss_events import oss_event_columns

        cols = oss_event_columns(text)
        wanted = StructType.fromDDL(body_schema).fieldNames() if body_schema else list(cols)
        lookup = {k.lower(): v for k, v in cols.items()}
        missing = [n for n in wanted if n.lower() not in lookup]
        if missing:
            raise ConfigError(f"config key schema: {missing} are not OSS event fields; have {list(cols)}")
        err = F.when(lookup["eventname"].isNull(), F.lit("not an OSS event notification"))
        return df.select(*[lookup[n.lower()].alias(n) for n in wanted], meta, err.alias(ERROR), *kept)
    if opts.format == "raw":
        fields = StructType.fromDDL(body_schema).fields if body_schema else []
        if len(fields) == 1:
            kind = fields[0].dataType.simpleString()
            value = F.unbase64("body") if kind == "binary" else text.cast(kind)
            out = value.alias(fields[0].name)
        else:
            out = text.alias("body")
        return df.select(out, meta, F.lit(None).cast("string").alias(ERROR), *kept)
    if not body_schema:
        raise ConfigError(f"config key schema: format {opts.format} needs a schema")
    schema = StructType.fromDDL(body_schema)
    if opts.format in BINARY_FORMATS:
        caps = (opts.max_decoded_rows, opts.max_decoded_bytes)
        return decode_binary(df, opts.format, schema, meta, list(carry), caps)
    parse_schema = StructType([*schema.fields]).add(_CORRUPT, "string")
    fmt = opts.json_timestamp_pattern or _TIMESTAMP_FORMATS[opts.json_timestamp_standard]
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, "timestampFormat": fmt}
    if opts.format == "json":
        parsed = F.from_json(text, parse_schema, options)
        malformed = F.lit("malformed JSON or a value of the wrong type")
    else:
        options["sep"] = opts.csv_delimiter
        parsed = F.from_csv(text, f"{body_schema}, {_CORRUPT} STRING", options)
        malformed = F.lit("malformed CSV or a value of the wrong type")
    p = df.select(F.col("*"), text.alias("_text"), parsed.alias("_p"))
    # Spark parses a blank body to an all-null row without a corrupt record: caught here. The
    # anchored pattern stops at the first character that is not white space, cheap per row.
    error = F.when(F.col("_text").isNull() | F.col("_text").rlike(r"^\s*$"), F.lit("empty body"))
    if not opts.json_ignore_parse_errors:
        # A JSON value that is not an object (a number, string, array, null) is a corrupt record.
        error = error.when(F.col(f"_p.{_CORRUPT}").isNotNull(), malformed)
        for field in schema.fields:
            if not field.nullable:  # ``name TYPE NOT NULL`` in the schema DDL
                error = error.when(F.col(f"_p.{field.name}").isNull(), F.lit(f"field {field.name!r} is null"))
    if opts.format == "json" and opts.json_fail_on_missing_field:
        keys = F.json_object_keys("_text")
        for name in schema.fieldNames():
            error = error.when(
                ~F.coalesce(F.array_contains(keys, name), F.lit(False)), F.lit(f"missing field {name!r}")
            )
    fields = [F.col(f"_p.{n}").alias(n) for n in schema.fieldNames()]
    return p.select(*fields, meta_column(p), error.alias(ERROR), *kept)


def decode_sources(df: DataFrame, sources: Sequence[Any], body_schema: str | None) -> DataFrame:
    """Decode a batch that may mix sources, each row with its own source's options (``sources``
    are the job's source configs, named by their ``name``)."""
    from pyspark.sql import functions as F

    parts = []
    for opts in sources:
        part = df if len(sources) == 1 else df.filter(F.col("source") == opts.name)
        parts.append(decode(part, opts, body_schema))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p, allowMissingColumns=True)
    return out


def apply_transform(good: DataFrame, transform: str | None) -> DataFrame:
    """The job's SQL ``transform`` over the decoded rows, registered as the view ``source``."""
    if not transform:
        return good
    good.createOrReplaceTempView("source")
    return good.sparkSession.sql(transform)
