"""Reads a Flink SQL script into its tables and INSERTs, with a line and column for every refusal."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from ingest.errors import ConfigError


class Flink(Spark):
    """Flink SQL as sqlglot reads it: Spark's dialect with Flink's ``ROW<…>``, ``BYTES`` and
    ``EXECUTE STATEMENT SET`` (Flink, like Spark, quotes identifiers with backticks)."""

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS = {**Spark.Tokenizer.KEYWORDS, "ROW": TokenType.STRUCT, "BYTES": TokenType.VARBINARY}
        COMMANDS = Spark.Tokenizer.COMMANDS - {TokenType.EXECUTE}


class ScriptError(ConfigError):
    """A statement, option, type or construct the script uses that mq-ingest cannot run."""


@dataclass(frozen=True)
class Where:
    """A position in the script, for error messages."""

    path: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.path}, line {self.line}, column {self.column}"


@dataclass
class Table:
    """``CREATE [TEMPORARY] TABLE name (columns) WITH (options)``."""

    name: str
    columns: list[tuple[str, exp.DataType, Where]]
    options: dict[str, tuple[str, Where]]
    where: Where


@dataclass
class Insert:
    """``INSERT INTO target [(columns)] SELECT …``."""

    target: str
    columns: list[str] | None
    select: exp.Select
    where: Where


@dataclass
class Script:
    """The statements of one script, in order."""

    path: str
    text: str
    tables: dict[str, Table] = field(default_factory=dict)
    inserts: list[Insert] = field(default_factory=list)

    def at(self, node: exp.Expr | Token | None, default: Where | None = None) -> Where:
        """The position of ``node`` (its first identifier or literal with a known position)."""
        start = None
        if isinstance(node, Token):
            start = node.start
        elif node is not None:
            for sub in node.walk():
                if isinstance(sub, (exp.Identifier, exp.Literal)) and "start" in sub.meta:
                    start = sub.meta["start"]
                    break
        if start is None:
            return default or Where(self.path, 1, 1)
        line = self.text.count("\n", 0, start) + 1
        return Where(self.path, line, start - (self.text.rfind("\n", 0, start) + 1) + 1)

    def refuse(
        self, node: exp.Expr | Token | None, message: str, default: Where | None = None
    ) -> ScriptError:
        """An error placed at ``node``."""
        return ScriptError(f"{self.at(node, default)}: {message}")


_SET_MARKERS = (
    (TokenType.EXECUTE, TokenType.VAR, TokenType.SET, TokenType.BEGIN),  # EXECUTE STATEMENT SET BEGIN
    (TokenType.BEGIN, TokenType.VAR, TokenType.SET),  # BEGIN STATEMENT SET;
)


def _strip_set_markers(tokens: list[Token]) -> list[Token]:
    """Drop the statement-set brackets around INSERTs: every INSERT of a script runs in one job."""
    for marker in _SET_MARKERS:
        head = tokens[: len(marker)]
        if [t.token_type for t in head] == list(marker) and head[1].text.upper() == "STATEMENT":
            return tokens[len(marker) :]
    if [t.token_type for t in tokens] == [TokenType.END]:
        return []
    return tokens


def _statements(text: str, path: str, script: Script) -> list[tuple[list[Token], Where]]:
    try:
        tokens = Flink().tokenize(text)
    except TokenError as err:
        raise ScriptError(f"{path}: {err}") from None
    out: list[tuple[list[Token], Where]] = []
    current: list[Token] = []
    for tok in [*tokens, None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            current = _strip_set_markers(current)
            if current:
                out.append((current, script.at(current[0])))
            current = []
        else:
            current.append(tok)
    return out


def _options(script: Script, create: exp.Create, where: Where) -> dict[str, tuple[str, Where]]:
    options: dict[str, tuple[str, Where]] = {}
    props = create.args.get("properties")
    for prop in props.expressions if props else []:
        if isinstance(prop, exp.TemporaryProperty):
            continue
        key, value = prop.this, prop.args.get("value")
        if not (isinstance(prop, exp.Property) and isinstance(key, exp.Literal) and key.is_string):
            raise script.refuse(prop, f"table property {prop.sql(dialect=Flink)} is not a WITH option", where)
        if not (isinstance(value, exp.Literal) and value.is_string):
            raise script.refuse(value, f"option {key.this!r}: the value must be a quoted string", where)
        if key.this in options:
            raise script.refuse(key, f"option {key.this!r} is given twice", where)
        options[key.this] = (value.this, script.at(key, where))
    return options


def _table(script: Script, create: exp.Create, where: Where) -> Table:
    schema = create.this
    if create.args.get("kind", "").upper() != "TABLE" or not isinstance(schema, exp.Schema):
        raise script.refuse(create, "only CREATE TABLE name (columns) WITH (options) is supported", where)
    name = schema.this.name
    columns = []
    for col in schema.expressions:
        if not isinstance(col, exp.ColumnDef) or col.args.get("kind") is None:
            what = "only plain columns are supported (no keys, watermarks)"
            raise script.refuse(col, f"table {name}: {what}", where)
        if col.args.get("constraints"):
            what = "column constraints are not supported"
            raise script.refuse(col, f"table {name}, column {col.name}: {what}", where)
        columns.append((col.name, col.args["kind"], script.at(col, where)))
    return Table(name, columns, _options(script, create, where), where)


def _insert(script: Script, insert: exp.Insert, where: Where) -> Insert:
    target = insert.this
    columns = None
    if isinstance(target, exp.Schema):
        columns = [c.name for c in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table) or insert.args.get("overwrite"):
        raise script.refuse(insert, "only INSERT INTO table [(columns)] SELECT … is supported", where)
    select = insert.expression
    if not isinstance(select, exp.Select):
        raise script.refuse(select, "INSERT INTO needs one SELECT (no UNION, VALUES or WITH)", where)
    return Insert(target.name, columns, select, where)


def parse_script(text: str, path: str) -> Script:
    """Parse a Flink SQL script: tables first, INSERTs that use them after.

    Raises:
        ScriptError: naming the line and column of the first statement it cannot run.
    """
    script = Script(path, text)
    parser = Flink().parser()
    for tokens, where in _statements(text, path, script):
        try:
            parsed = parser.parse(tokens, text)
        except ParseError as err:
            e = err.errors[0] if err.errors else {}
            line, col = e.get("line", where.line), e.get("col", where.column)
            raise ScriptError(f"{path}, line {line}, column {col}: {e.get('description', err)}") from None
        node = parsed[0] if parsed else None
        if isinstance(node, exp.Create):
            table = _table(script, node, where)
            if table.name in script.tables:
                raise script.refuse(node, f"table {table.name} is created twice", where)
            script.tables[table.name] = table
        elif isinstance(node, exp.Insert):
            script.inserts.append(_insert(script, node, where))
        else:
            kind = tokens[0].text.upper()
            supported = "CREATE TABLE and INSERT INTO are"
            raise ScriptError(f"{where}: {kind} statements are not supported ({supported})")
    if not script.inserts:
        raise ScriptError(f"{path}: the script has no INSERT INTO … SELECT, so there is nothing to run")
    return script
