"""Decodes staged message bodies into the job's schema and marks the rows that cannot be decoded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ingest.config.source_base import DecodeOptions
from ingest.connector import META
from ingest.connector.envelope import FIELDS, FILE_COLUMN
from ingest.decode.binary import BINARY_FORMATS, ERROR, decode_binary
from ingest.decode.confluent import confluent_columns
from ingest.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

_CORRUPT = "_corrupt_record"
_TIMESTAMP_FORMATS = {
    # ISO-8601: any number of fractional digits (Spark keeps microseconds) and the offsets
    # Z, +08, +0800 and +08:00, or none (the session's time zone).
    "ISO-8601": "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][XXX][XX][X]",
    "SQL": "yyyy-MM-dd HH:mm:ss[.SSS][.SS][.S]",
}
SUPPORTED_FORMATS = ("json", "csv", "raw", *BINARY_FORMATS)
JSON_MAX_DEPTH = 1000
"""Spark's JSON parser (Jackson, ``StreamReadConstraints``) refuses documents nested deeper."""


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
            import ingest.decode.oss_events  # noqa: F401
        except ImportError:
            raise ConfigError(f"config key sources.{name}.messageType: OSS is not available") from None
    if body_schema and spark_ready:
        try:
            schema = struct_of(body_schema)
        except Exception as err:
            raise ConfigError(f"config key schema: invalid Spark DDL {body_schema!r}: {err}") from None
        if opts.format == "avro":  # bare records are read with the Avro schema derived from it
            from pyspark.sql.pandas.types import to_arrow_schema

            from ingest.decode.avro_schema import avro_schema

            try:
                avro_schema(to_arrow_schema(schema, timezone="UTC"))
            except (ValueError, TypeError) as err:
                raise ConfigError(f"config key schema: no Avro schema for format avro: {err}") from None


def struct_of(ddl: str) -> StructType:
    """The ``StructType`` of a Spark DDL column list (``fromDDL`` is typed to return any ``DataType``)."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    if not isinstance(schema, StructType):
        raise ConfigError(f"config key schema: {ddl!r} is not a list of columns")
    return schema


def meta_column(with_file: bool = True) -> Column:
    """The envelope (and, ``with_file``, the staged file) as one ``_meta`` struct."""
    from pyspark.sql import functions as F

    names = [n for n, _ in FIELDS] + ([FILE_COLUMN] if with_file else [])
    return F.struct(*[F.col(n) for n in names]).alias(META)


def _body_text() -> Column:
    from pyspark.sql import functions as F

    return F.when(F.col("body_base64"), F.unbase64("body").cast("string")).otherwise(F.col("body"))


NOT_UTF8 = "body is not UTF-8 text (its bytes are kept as base64)"
"""The error of a text-format body whose bytes are not UTF-8: never decoded with U+FFFD in their place."""


def _not_utf8() -> Column:
    """Whether a base64 body's bytes are not UTF-8 (null for a text body: only a source that found
    its bytes were not UTF-8 stages them as base64, so the check never runs on the common path)."""
    from pyspark.sql import functions as F

    return F.when(F.col("body_base64"), ~F.is_valid_utf8(F.unbase64("body").cast("string")))


def decode(
    df: DataFrame, opts: DecodeOptions, body_schema: str | None, carry: Sequence[str] = ()
) -> DataFrame:
    """Envelope rows → the schema's columns, ``_meta``, ``_error`` and the ``carry`` columns as they are
    (see :class:`Decoder`)."""
    return Decoder(opts, body_schema, carry, with_file=FILE_COLUMN in df.columns)(df)


class Decoder:
    """One source's decode plan: its Spark columns are built once and applied to each micro-batch.

    Building the columns costs about a thousand Py4J calls (~0.1 s); a micro-batch only
    selects them.

    json: ``from_json`` in PERMISSIVE mode; a blank body is an error; a JSON value that
    is not an object, malformed JSON, a value of the wrong type, an unparsable timestamp or a
    null in a ``NOT NULL`` schema field is an error, unless ``json.ignore-parse-errors``
    (then the fields are null, as Flink's option does); JSON nested deeper than the parser
    allows (``JSON_MAX_DEPTH``) is an error saying so. ``json.fail-on-missing-field``
    makes a body lacking a schema field an error. csv: ``from_csv`` likewise. raw: the body
    as a single column (named by a one-column schema, ``body`` otherwise). avro, parquet,
    orc: each (base64) body is one record set, giving one row per record
    (:mod:`ingest.decode.binary`).

    Args:
        opts: the source's decode options.
        body_schema: the job's schema (Spark DDL); None for schemaless json and raw.
        carry: columns passed through as they are.
        with_file: the rows have the staged file's column (``_file``), kept in ``_meta``.
    """

    def __init__(
        self, opts: DecodeOptions, body_schema: str | None, carry: Sequence[str] = (), with_file: bool = True
    ) -> None:
        from pyspark.sql import functions as F

        self.opts = opts
        self.schema = struct_of(body_schema) if body_schema else None
        self.carry = list(carry)
        self.meta = meta_column(with_file)
        self.kept = [F.col(c) for c in carry]
        self.text = _body_text()
        self.parse: list[Column] = []
        """json and csv: the columns of the first select (the envelope, the body text, the parsed body)."""
        self.columns = self._columns(body_schema)
        """The columns of the (last) select."""

    def __call__(self, df: DataFrame) -> DataFrame:
        if self.opts.message_type != "OSS" and self.opts.format in BINARY_FORMATS:
            assert self.schema is not None
            caps = (self.opts.max_decoded_rows, self.opts.max_decoded_bytes)
            return decode_binary(df, self.opts.format, self.schema, self.meta, self.carry, caps)
        if self.parse:
            df = df.select(*self.parse)
        return df.select(*self.columns)

    def _columns(self, body_schema: str | None) -> list[Column]:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        opts, text, meta, kept = self.opts, self.text, self.meta, self.kept
        if opts.message_type == "OSS":
            return [*_oss_columns(text, opts, body_schema), meta, *kept]
        if getattr(opts, "record_schema", None) == "confluent":  # SQS: the Confluent source's record
            return [*confluent_columns(text), meta, F.lit(None).cast("string").alias(ERROR), *kept]
        if opts.format == "raw":
            fields = self.schema.fields if self.schema else []
            kind = fields[0].dataType.simpleString() if len(fields) == 1 else "string"
            if len(fields) == 1:
                value = F.unbase64("body") if kind == "binary" else text.cast(kind)
                out = value.alias(fields[0].name)
            else:
                out = text.alias("body")
            error = F.lit(None) if kind == "binary" else F.when(_not_utf8(), F.lit(NOT_UTF8))
            return [out, meta, error.cast("string").alias(ERROR), *kept]
        if self.schema is None and opts.format == "json":
            # Schemaless: the body as text, and a JSON object's top-level fields as a map of their
            # JSON texts; a body that is not an object is no error, only a blank one is.
            as_map = F.from_json(text, "MAP<STRING, STRING>")
            blank = F.when(_not_utf8(), F.lit(NOT_UTF8))
            blank = blank.when(text.isNull() | text.rlike(r"^\s*$"), F.lit("empty body"))
            return [text.alias("body"), as_map.alias("fields"), meta, blank.alias(ERROR), *kept]
        if self.schema is None:
            raise ConfigError(f"config key schema: format {opts.format} needs a schema")
        schema = self.schema
        if opts.format in BINARY_FORMATS:
            return []
        parse_schema = StructType([*schema.fields]).add(_CORRUPT, "string")
        fmt = opts.json_timestamp_pattern or _TIMESTAMP_FORMATS[opts.json_timestamp_standard]
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, "timestampFormat": fmt}
        if opts.format == "json":
            parsed = F.from_json(text, parse_schema, options)
            too_deep = F.lit(f"JSON nested deeper than {JSON_MAX_DEPTH} levels (the parser's limit)")
            malformed = F.when(_nested_too_deep(F.col("_text")), too_deep).otherwise(
                F.lit("malformed JSON or a value of the wrong type")
            )
        else:
            options["sep"] = opts.csv_delimiter
            parsed = F.from_csv(text, f"{body_schema}, {_CORRUPT} STRING", options)
            malformed = F.lit("malformed CSV or a value of the wrong type")
        self.parse = [F.col("*"), text.alias("_text"), parsed.alias("_p")]
        # Spark parses a blank body to an all-null row without a corrupt record: caught here. The
        # anchored pattern stops at the first character that is not white space, cheap per row.
        error = F.when(_not_utf8(), F.lit(NOT_UTF8))
        error = error.when(F.col("_text").isNull() | F.col("_text").rlike(r"^\s*$"), F.lit("empty body"))
        if not opts.json_ignore_parse_errors:
            # A JSON value that is not an object (a number, string, array, null) is a corrupt record.
            error = error.when(F.col(f"_p.{_CORRUPT}").isNotNull(), malformed)
            for field in schema.fields:
                if not field.nullable:  # ``name TYPE NOT NULL`` in the schema DDL
                    error = error.when(
                        F.col(f"_p.{field.name}").isNull(), F.lit(f"field {field.name!r} is null")
                    )
        if opts.format == "json" and opts.json_fail_on_missing_field:
            keys = F.json_object_keys("_text")
            for name in schema.fieldNames():
                error = error.when(
                    ~F.coalesce(F.array_contains(keys, name), F.lit(False)), F.lit(f"missing field {name!r}")
                )
        columns = [F.col(f"_p.{n}").alias(n) for n in schema.fieldNames()]
        return [*columns, meta, error.alias(ERROR), *kept]


def _nested_too_deep(text: Column) -> Column:
    """Whether a JSON text opens more than ``JSON_MAX_DEPTH`` arrays and objects at once.

    Only a row already found malformed evaluates it (a ``CASE`` branch): it drops escapes, then
    strings, then all but the brackets, and walks those keeping the depth and its maximum.
    """
    from pyspark.sql import functions as F

    brackets = F.regexp_replace(
        F.regexp_replace(F.regexp_replace(text, r"(?s)\\.", ""), r'"[^"]*"?', ""), r"[^\[\]{}]", ""
    )

    def step(acc: Column, c: Column) -> Column:
        depth = acc["d"] + F.when(c.isin("[", "{"), 1).otherwise(-1)
        return F.struct(depth.alias("d"), F.greatest(acc["m"], depth).alias("m"))

    start = F.struct(F.lit(0).alias("d"), F.lit(0).alias("m"))
    deepest = F.aggregate(F.split(brackets, ""), start, step, lambda acc: acc["m"])
    return (F.length(brackets) > JSON_MAX_DEPTH) & (deepest > JSON_MAX_DEPTH)


def _oss_columns(text: Column, opts: DecodeOptions, ddl: str | None) -> list[Column]:
    """OSS event notifications: the schema's columns, typed as the schema says, with the json options,
    and ``_error``.

    A value that does not parse as its column's type is an error (``json.ignore-parse-errors``:
    null); with ``json.fail-on-missing-field`` a requested column the event lacks is one too.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType

    from ingest.decode.oss_events import OSS_EVENT_COLUMNS, OSS_EVENT_DDL, oss_event_columns

    raw = oss_event_columns(text, typed=False)
    schema = struct_of(ddl or OSS_EVENT_DDL)
    missing = [f.name for f in schema.fields if f.name.lower() not in raw]
    if missing:
        raise ConfigError(f"config key schema: {missing} are not OSS event fields; have {OSS_EVENT_COLUMNS}")
    fmt = opts.json_timestamp_pattern or _TIMESTAMP_FORMATS[opts.json_timestamp_standard]
    error = F.when(_not_utf8(), F.lit(NOT_UTF8))
    error = error.when(raw["eventname"].isNull(), F.lit("not an OSS event notification"))
    columns = []
    for field in schema.fields:
        value = raw[field.name.lower()]
        if isinstance(field.dataType, (TimestampType, TimestampNTZType)):
            typed = F.try_to_timestamp(value, F.lit(fmt)).cast(field.dataType)
        else:
            typed = value.try_cast(field.dataType)
        if opts.json_fail_on_missing_field:
            error = error.when(value.isNull(), F.lit(f"missing field {field.name!r}"))
        if not opts.json_ignore_parse_errors:
            bad = value.isNotNull() & typed.isNull()
            error = error.when(bad, F.lit(f"field {field.name!r} is not a {field.dataType.simpleString()}"))
        columns.append(typed.alias(field.name))
    return [*columns, error.alias(ERROR)]


def decode_sources(
    df: DataFrame,
    sources: Sequence[Any],
    body_schema: str | None,
    carry: Sequence[str] = (),
    decoders: dict[tuple, Decoder] | None = None,
) -> DataFrame:
    """Decode a batch that may mix sources, each row with its own source's options (``sources``
    are the job's source configs, named by their ``name``), keeping the ``carry`` columns.

    ``decoders`` keeps each source's :class:`Decoder` between calls (the rows must then always
    have the ``_file`` column, as the job's micro-batches do).
    """
    from pyspark.sql import functions as F

    with_file = True if decoders is not None else FILE_COLUMN in df.columns
    cache = decoders if decoders is not None else {}
    parts = []
    for opts in sources:
        key = (opts.name, tuple(carry))
        if key not in cache:
            cache[key] = Decoder(opts, body_schema, carry, with_file)
        part = df if len(sources) == 1 else df.filter(F.col("source") == opts.name)
        parts.append(cache[key](part))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p, allowMissingColumns=True)
    return out
