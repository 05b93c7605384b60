"""Reads a Flink SQL script into its tables and INSERTs, with a line and column for every refusal."""

from __future__ import annotations

import re
from collections.abc import Iterator
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
        return self.at_offset(start)

    def at_offset(self, offset: int) -> Where:
        """The position of the character at ``offset`` in the script's text."""
        line = self.text.count("\n", 0, offset) + 1
        return Where(self.path, line, offset - (self.text.rfind("\n", 0, offset) + 1) + 1)

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


_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_WINDOWS = {"TUMBLE", "HOP", "CUMULATE", "SESSION"}


def _gaps(tokens: list[Token], start: int, end: int) -> list[tuple[int, int]]:
    """The spans from ``start`` to ``end`` between the tokens: whitespace and comments."""
    edges = [start]
    for tok in tokens:
        edges += [tok.start, tok.end + 1]
    return list(zip(edges[::2], [*edges[1::2], end], strict=True))


def _skip_gap(text: str, offset: int) -> int:
    """The offset of the first character from ``offset`` on that is not whitespace or a whole comment."""
    while True:
        offset = len(text) - len(text[offset:].lstrip())
        comment = _COMMENT.match(text, offset)
        if not comment:
            return offset
        offset = comment.end()


def _unreadable(script: Script, tokens: list[Token]) -> ScriptError:
    """The error for text the tokenizer stopped at, placed after the last token it read."""
    offset = _skip_gap(script.text, tokens[-1].end + 1 if tokens else 0)
    rest = script.text[offset : offset + 2]
    quote = next((c for c in rest if c in "'\"`"), None)
    if rest.startswith("/*"):
        what = "the comment is not closed (no */)"
    elif quote:
        what = f"the {'quoted name' if quote == '`' else 'string'} is not closed (no {quote})"
    else:
        what = "the text cannot be read as SQL"
    return ScriptError(f"{script.at_offset(offset)}: {what}")


def _hint(script: Script, tokens: list[Token], start: int, end: int) -> ScriptError | None:
    """The error for the first ``/*+ … */`` hint from ``start`` to ``end``: sqlglot keeps a
    query hint, but takes a table hint for a comment and drops it."""
    found = [(t.start, t.text) for t in tokens if t.token_type == TokenType.HINT]
    for a, b in _gaps(tokens, start, end):
        found += [(m.start(), m.group()) for m in _COMMENT.finditer(script.text, a, b)]
    hints = sorted((at, hint) for at, hint in found if hint.startswith("/*+"))
    if not hints:
        return None
    at, hint = hints[0]
    name = re.findall(r"^/\*\+\s*(\w*)", hint)[0].upper()
    what = f"hints (/*+ {name + '(…)' if name else '…'} */) are not supported"
    if name == "OPTIONS":
        what += "; give the options in the table's WITH (…)"
    return ScriptError(f"{script.at_offset(at)}: {what}")


def _statements(script: Script) -> Iterator[tuple[list[Token], Where]]:
    """Each statement's tokens and position, in order (a hint is refused when its statement is reached)."""
    tokenizer = Flink().tokenizer()
    try:
        tokens = tokenizer.tokenize(script.text)
    except TokenError:
        raise _unreadable(script, tokenizer.tokens) from None
    current: list[Token] = []
    start = 0
    for tok in [*tokens, None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            end = tok.start if tok is not None else len(script.text)
            hint = _hint(script, current, start, end)
            if hint is not None:
                raise hint
            current = _strip_set_markers(current)
            if current:
                yield current, script.at(current[0])
            current, start = [], end + 1
        else:
            current.append(tok)


def _unparsed(script: Script, tokens: list[Token], err: ParseError, where: Where) -> ScriptError:
    """The error for a statement sqlglot cannot parse: the Flink construct before the place it
    stopped, if one is known, else sqlglot's description there."""
    e = err.errors[0] if err.errors else {}
    line, col = e.get("line", where.line), e.get("col", where.column)
    for i, tok in enumerate(tokens):
        at = script.at(tok)
        if (at.line, at.column) > (line, col):
            break
        word = tok.text.upper() if tok.token_type != TokenType.STRING else ""
        before = [t.token_type for t in tokens[max(i - 2, 0) : i]]
        after = tokens[i + 1].token_type if i + 1 < len(tokens) else None
        named = before[-1:] not in ([TokenType.COMMA], [TokenType.L_PAREN])  # not a column's name
        if word in _WINDOWS and before == [TokenType.TABLE, TokenType.L_PAREN]:
            return ScriptError(f"{at}: windows ({word}) are not supported")
        if word == "WATERMARK" and after == TokenType.FOR:
            return ScriptError(f"{at}: watermarks (WATERMARK FOR) are not supported")
        if word == "METADATA" and named:
            return ScriptError(f"{at}: metadata columns (METADATA) are not supported")
        if word == "MULTISET" and named:
            return ScriptError(f"{at}: type MULTISET is not supported")
    return ScriptError(f"{script.path}, line {line}, column {col}: {e.get('description', err)}")


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
    for tokens, where in _statements(script):
        try:
            parsed = parser.parse(tokens, text)
        except ParseError as err:
            raise _unparsed(script, tokens, err, where) from None
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
    if not script.inserts and not script.tables:
        raise ScriptError(f"{path}: the script has no CREATE TABLE or INSERT INTO … SELECT statement")
    return script
