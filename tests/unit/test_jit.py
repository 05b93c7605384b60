"""The JIT directive covers Spark's per-batch planning code and none of the per-row code."""

from __future__ import annotations

import json

import pytest

from ingest.runtime import jit

PER_ROW = [
    "com/fasterxml/jackson/core/json/UTF8StreamJsonParser",
    "org/apache/spark/sql/catalyst/json/JacksonParser",
    "org/apache/spark/sql/catalyst/json/JacksonGenerator",
    "org/apache/spark/sql/catalyst/expressions/GeneratedClass$GeneratedIteratorForCodegenStage1",
    "org/apache/spark/sql/catalyst/expressions/UnsafeRow",
    "org/apache/spark/sql/catalyst/expressions/codegen/UnsafeRowWriter",
    "org/apache/spark/sql/catalyst/expressions/codegen/BufferHolder",
    "org/apache/spark/unsafe/types/UTF8String",
    "org/apache/spark/sql/execution/datasources/FileScanRDD$$anon$1",
    "org/apache/hadoop/util/LineReader",
    "org/apache/hadoop/io/Text",
    "java/time/format/DateTimeFormatter",
    "jdk/internal/math/FloatingDecimal",
    "java/util/regex/Pattern$CharProperty",
]
PER_BATCH = [
    "org/apache/spark/sql/catalyst/analysis/Analyzer",
    "org/apache/spark/sql/catalyst/rules/RuleExecutor",
    "org/apache/spark/sql/catalyst/trees/TreeNode",
    "org/apache/spark/sql/catalyst/expressions/codegen/CodeGenerator$",
    "org/apache/xbean/asm9/ClassReader",
    "java/io/ObjectInputStream$BlockDataInputStream",
    "org/apache/hadoop/io/WritableUtils",
]


@pytest.mark.parametrize("cls", PER_ROW)
def test_per_row_code_still_reaches_c2(cls: str) -> None:
    assert not jit.is_planning_code(cls)


@pytest.mark.parametrize("cls", PER_BATCH)
def test_planning_code_is_left_to_c1(cls: str) -> None:
    assert jit.is_planning_code(cls)


def test_the_directive_excludes_the_planning_code_from_c2_only() -> None:
    [directive] = json.loads(jit.directives())
    assert directive["c2"] == {"Exclude": True} and set(directive) == {"match", "c2"}
    assert directive["match"] == [f"{c}.*" for c in jit.PLANNING_CODE]  # every method of each class


class _Refusing:
    """A session double (no JVM needed to show it): any use of it fails."""

    def __getattr__(self, name: str):
        raise RuntimeError("no JVM here")


def test_more_cpus_than_the_cap_leave_the_jvm_untouched() -> None:
    assert jit.apply(_Refusing(), cpus=jit.MAX_CPUS + 1) is False


def test_a_jvm_that_cannot_take_the_directive_runs_as_is(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="ingest.runtime.jit")
    assert jit.apply(_Refusing(), cpus=2) is False
    assert "not applied: no JVM here" in caplog.text
