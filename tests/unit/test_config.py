"""Config loading: bad keys and values are named, env references resolve, secrets never leak."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest
import yaml

from ingest.config import load_config, parse_config
from ingest.errors import ConfigError, redact


def base(**over):
    cfg = {
        "name": "job",
        "sources": [{"type": "fake", "name": "q", "path": "x"}],
        "schema": "a BIGINT",
        "sinks": [{"type": "files", "name": "out", "path": "o"}],
        "checkpoint": "c",
        "state": {"path": "s"},
        "staging": {"dir": "st"},
    }
    cfg.update(over)
    return cfg


def test_local_yaml_is_valid():
    cfg = load_config("conf/local.yaml")
    assert cfg.sources[0].type == "fake"
    assert cfg.trigger.mode == "available_now"
    assert cfg.staging.roll_interval == 0.5
    assert cfg.state.dedup_window == 7 * 86400


def test_unknown_key_is_named():
    with pytest.raises(ConfigError) as err:
        parse_config(base(stagin={"dir": "x"}))
    assert "stagin" in str(err.value)


def test_limit_violation_names_key_and_limit():
    src = {"type": "mns", "name": "m", "endpoint": "http://127.0.0.1:1", "queueName": "q"}
    src |= {"accessKeyId": "id", "accessKeySecret": "s3cr3t-value", "batchSize": 17}
    with pytest.raises(ConfigError) as err:
        parse_config(base(sources=[src]))
    text = str(err.value)
    assert "sources.m.batchSize" in text
    assert "16" in text
    assert "s3cr3t-value" not in text


def test_bad_literal_lists_allowed_values():
    with pytest.raises(ConfigError) as err:
        parse_config(base(trigger={"mode": "sometimes"}))
    assert "trigger.mode" in str(err.value)
    assert "'processing_time' or 'available_now'" in str(err.value)


def test_unknown_source_type_lists_types():
    with pytest.raises(ConfigError) as err:
        parse_config(base(sources=[{"type": "kafka", "name": "k"}]))
    assert "'fake', 'sqs', 'mns'" in str(err.value)


def test_reference_option_names_accepted():
    src = {
        "type": "mns",
        "name": "m",
        "endpoint": "http://127.0.0.1:1",
        "queueName": "q",
        "accessKeyId": "id",
        "accessKeySecret": "sec",
        "batchSize": 8,
        "pollingWaitTime": "10s",
        "messageType": "RAW",
        "json.fail-on-missing-field": True,
    }
    cfg = parse_config(base(sources=[src]))
    s = cfg.sources[0]
    assert (s.batch_size, s.polling_wait_time, s.json_fail_on_missing_field) == (8, 10.0, True)


def test_oss_requires_json():
    src = {"type": "fake", "name": "q", "path": "x", "format": "csv", "messageType": "OSS"}
    with pytest.raises(ConfigError, match="messageType OSS requires format json"):
        parse_config(base(sources=[src]))


def test_dead_letter_policy_needs_target():
    src = {"type": "fake", "name": "q", "path": "x", "on_bad_message": "dead_letter"}
    with pytest.raises(ConfigError, match="dead_letter is required by"):
        parse_config(base(sources=[src]))


def test_bad_messages_fail_by_default_and_go_to_the_dead_letter_target_when_there_is_one():
    """Bad input never vanishes unless asked: no policy given is fail, or dead_letter with a target."""
    assert parse_config(base()).sources[0].on_bad_message == "fail"
    with_target = parse_config(base(dead_letter={"path": "dl"}))
    assert with_target.sources[0].on_bad_message == "dead_letter"
    dlq_sink = {"type": "files", "name": "dlq", "path": "d"}
    sink_target = base(sinks=[*base()["sinks"], dlq_sink], dead_letter={"sink": "dlq"})
    assert parse_config(sink_target).sources[0].on_bad_message == "dead_letter"
    for target in (None, {"path": "dl"}):
        src = {"type": "fake", "name": "q", "path": "x", "on_bad_message": "skip"}
        cfg = parse_config(base(sources=[src], dead_letter=target))
        assert cfg.sources[0].on_bad_message == "skip"  # only when asked
        src["on_bad_message"] = "fail"
        assert parse_config(base(sources=[src], dead_letter=target)).sources[0].on_bad_message == "fail"
    ignore = {"type": "fake", "name": "q", "path": "x", "json.ignore-parse-errors": True}
    assert parse_config(base(sources=[ignore])).sources[0].on_bad_message == "skip"
    ignore["json.ignore-parse-errors"] = False
    assert parse_config(base(sources=[ignore])).sources[0].on_bad_message == "fail"


def test_a_dead_letter_sink_needs_a_sink_for_the_decoded_rows_beside_it():
    with pytest.raises(ConfigError, match=r"dead_letter\.sink 'out' is the only sink"):
        parse_config(base(dead_letter={"sink": "out"}))
    two = parse_config(
        base(
            sinks=[*base()["sinks"], {"type": "files", "name": "dlq", "path": "d"}],
            dead_letter={"sink": "dlq"},
        )
    )
    assert [s.name for s in two.data_sinks] == ["out"] and two.dead_letter_sink.name == "dlq"


def test_each_source_gets_the_default_of_its_own_options():
    sources = [
        {"type": "fake", "name": "a", "path": "x"},
        {"type": "fake", "name": "b", "path": "x", "on_bad_message": "skip"},
        {"type": "fake", "name": "c", "path": "x", "json.ignore-parse-errors": "true"},
    ]
    cfg = parse_config(base(sources=sources, dead_letter={"path": "dl"}))
    assert [s.on_bad_message for s in cfg.sources] == ["dead_letter", "skip", "skip"]


def test_env_reference_resolves_and_is_redacted(monkeypatch):
    monkeypatch.setenv("MNS_SECRET_T1", "very-secret-key-123")
    src = {"type": "mns", "name": "m", "endpoint": "http://127.0.0.1:1", "queueName": "q"}
    src |= {"accessKeyId": "id", "accessKeySecret": "${env:MNS_SECRET_T1}"}
    cfg = parse_config(base(sources=[src]))
    assert cfg.sources[0].access_key_secret.get_secret_value() == "very-secret-key-123"
    assert "very-secret-key-123" not in repr(cfg)
    assert redact("auth failed for very-secret-key-123") == "auth failed for ***"


def test_missing_env_reference_names_key(monkeypatch):
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    with pytest.raises(ConfigError) as err:
        parse_config(base(checkpoint="${env:NOPE_NOT_SET}"))
    assert "checkpoint" in str(err.value) and "NOPE_NOT_SET" in str(err.value)


def test_invalid_yaml_names_file(tmp_path):
    p = tmp_path / "job.yaml"
    p.write_text(textwrap.dedent("name: [unclosed\n"))
    with pytest.raises(ConfigError, match=r"job\.yaml"):
        load_config(p)


def test_duplicate_names_rejected():
    sinks = [{"type": "files", "name": "o", "path": "a"}, {"type": "console", "name": "o"}]
    with pytest.raises(ConfigError, match="duplicate"):
        parse_config(base(sinks=sinks))


def test_sizes_and_durations():
    cfg = parse_config(base(staging={"dir": "d", "roll_bytes": "4MiB", "roll_interval": "250ms"}))
    assert cfg.staging.roll_bytes == 4 * 1024 * 1024
    assert cfg.staging.roll_interval == 0.25
    with pytest.raises(ConfigError, match=r"staging\.roll_interval"):
        parse_config(base(staging={"dir": "d", "roll_interval": "soon"}))


def test_redacting_formatter(monkeypatch, capsys):
    from ingest.runtime.console import setup_logging

    redact.add(["hunter2-password"])
    setup_logging("INFO")
    logging.getLogger("t").info("connecting with hunter2-password")
    err = capsys.readouterr().err
    assert "connecting with ***" in err
    assert "hunter2-password" not in err


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"checkpoint": ""}, "checkpoint"),
        ({"staging": {"dir": ""}}, "staging.dir"),
        ({"state": {"path": ""}}, "state.path"),
        ({"state": {"path": "s", "dedup_window": float("inf")}}, "state.dedup_window"),
        ({"staging": {"dir": "st", "max_in_flight": 10**15}}, "staging.max_in_flight"),
        ({"staging": {"dir": "st", "max_staged_bytes": "1000000GiB"}}, "staging.max_staged_bytes"),
        ({"trigger": {"interval": float("nan")}}, "trigger.interval"),
    ],
)
def test_values_that_would_fail_later_fail_at_load_naming_the_key(over, key):
    with pytest.raises(ConfigError) as err:
        parse_config(base(**over))
    assert str(err.value).splitlines()[0].startswith(f"<dict>: {key}: ")  # the key on the error's line


def test_yaml_problems_name_the_position_never_the_line(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("name: a\nname: b\n")
    with pytest.raises(ConfigError, match=r"line 2, column 1: duplicate key 'name'"):
        load_config(dup)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: job\nsources: [\n  password: hunter2 ]: x\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert "line 3" in str(err.value) and "hunter2" not in str(err.value)
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"is not UTF-8 text \(byte 9\)"):
        load_config(latin1)


def test_a_password_inside_the_proxy_url_is_a_secret(caplog):
    src = {
        "type": "sqs",
        "name": "q",
        "sqs.url": "http://127.0.0.1:1/000000000000/q",
        "sqs.proxy.url": "http://alice:s3cr%21t-pw@proxy.local:3128",
    }
    parse_config(base(sources=[src]))
    line = "connect failed via http://alice:s3cr%21t-pw@proxy.local:3128 (s3cr!t-pw)"
    assert redact(line) == "connect failed via http://alice:***@proxy.local:3128 (***)"


def sqs_source(**options):
    return {"type": "sqs", "name": "q", "sqs.url": "https://sqs.eu-west-1.amazonaws.com/1/q"} | options


def mns_source(**options):
    base = {"type": "mns", "name": "m", "queueName": "q", "accessKeyId": "id", "accessKeySecret": "sk"}
    return base | {"endpoint": "http://1234.mns.cn-hangzhou.aliyuncs.com"} | options


def test_connect_tasks_max_is_the_receiver_count_and_short_polling_is_allowed():
    cfg = parse_config(base(sources=[sqs_source(**{"tasks.max": 3, "sqs.waittime.seconds": 0})]))
    assert (cfg.sources[0].receivers, cfg.sources[0].poll_wait) == (3, 0.0)
    with pytest.raises(ConfigError, match=r"receivers or tasks\.max, not both"):
        parse_config(base(sources=[sqs_source(**{"tasks.max": 3, "receivers": 2})]))


def test_mns_region_is_checked_against_the_endpoint_and_the_source_has_no_body_limit():
    assert parse_config(base(sources=[mns_source(region="cn-hangzhou")])).sources[0].region == "cn-hangzhou"
    with pytest.raises(
        ConfigError, match=r"region cn-beijing is not the region of endpoint .*\(cn-hangzhou\)"
    ):
        parse_config(base(sources=[mns_source(region="cn-beijing")]))
    emulator = mns_source(endpoint="http://127.0.0.1:8791", region="cn-beijing")  # no region in the host
    assert parse_config(base(sources=[emulator])).sources[0].region == "cn-beijing"
    with pytest.raises(ConfigError, match="max_body_bytes"):  # MNS refuses bodies over 64 KB at send
        parse_config(base(sources=[mns_source(max_body_bytes=1000)]))


def test_ack_calls_follow_the_receivers_unless_set():
    """As many deletes in flight as receives: acks keep pace at any round trip (issue 26)."""
    sqs = {"type": "sqs", "name": "q", "sqs.url": "https://sqs.us-east-1.amazonaws.com/1/q"}
    mns = {"type": "mns", "name": "q", "endpoint": "http://e", "queueName": "q"}
    mns |= {"accessKeyId": "id", "accessKeySecret": "ack-calls-test-key-5a1"}
    for src in (sqs, mns):
        assert parse_config(base(sources=[src])).sources[0].ack_calls == 4
        assert parse_config(base(sources=[{**src, "receivers": 32}])).sources[0].ack_calls == 32
        key = "sqs.max.inflight.requests" if src is sqs else "maxInFlightRequests"
        assert parse_config(base(sources=[{**src, "receivers": 32, key: 8}])).sources[0].ack_calls == 8


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        ({"authorizationMode": "access_key"}, "access_key needs accessKeyId and accessKeySecret"),
        ({"authorizationMode": "sts_token", "accessKeyId": "ak"}, "or none of them"),
        ({"authorizationMode": "sts_token", "accessKeyId": "ak", "accessKeySecret": "s"}, "or none of them"),
    ],
)
def test_sls_target_keys_are_all_or_none_for_sts_token(keys, error):
    from pydantic import ValidationError

    from ingest.config.job_events import SlsTarget

    target = {"type": "sls", "project": "mq-ingest", "logstore": "events", "region": "cn-hangzhou"}
    with pytest.raises(ValidationError, match=error):
        SlsTarget.model_validate(target | keys)
    chain = SlsTarget.model_validate(target | {"authorizationMode": "sts_token"})
    assert chain.access_key_id is None and chain.security_token is None, "the default credential chain"


def _error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    ("over", "key", "other"),
    [
        ({"sinks": [{"type": "files", "name": "out", "path": "st"}]}, "sinks.out.path", "staging.dir"),
        ({"state": {"path": "st/state"}}, "staging.dir", "state.path"),
        ({"state": {"path": "./c"}}, "state.path", "checkpoint"),
        ({"staging": {"dir": "c/staging"}}, "staging.dir", "checkpoint"),
        ({"staging": {"dir": "c"}}, "staging.dir", "checkpoint"),
        ({"sinks": [{"type": "files", "name": "out", "path": "s"}]}, "sinks.out.path", "state.path"),
        ({"sinks": [{"type": "delta", "name": "lake", "path": "c/"}]}, "sinks.lake.path", "checkpoint"),
        ({"dead_letter": {"path": "o/dead"}}, "sinks.out.path", "dead_letter.path"),
        (
            {"staging": {"dir": "st", "clean_source": "archive", "archive_dir": "st/done"}},
            "staging.archive_dir",
            "staging.dir",
        ),
    ],
)
def test_overlapping_job_directories_exit_2_naming_both_keys(tmp_path, monkeypatch, capsys, over, key, other):
    from ingest.run import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(base(**over)))
    assert main(["--config", "job.yaml"]) == 2
    [line] = _error_lines(capsys)
    assert line.startswith(f"error: job.yaml: {key}: ") and f" {other} (" in line, line


def test_a_file_url_and_a_local_path_to_one_directory_overlap(tmp_path):
    out = {"type": "files", "name": "out", "path": f"file://{tmp_path}/c/out"}
    with pytest.raises(ConfigError, match=r"^<dict>: sinks\.out\.path: file://.* is inside checkpoint \("):
        parse_config(base(checkpoint=str(tmp_path / "c"), sinks=[out]))


def test_object_store_urls_compare_as_strings_and_siblings_pass():
    lake = {"type": "delta", "name": "lake", "path": "s3://bucket/events"}
    with pytest.raises(ConfigError, match=r"^<dict>: sinks\.out\.path: s3://bucket/events/ is the same"):
        parse_config(base(sinks=[lake, {"type": "files", "name": "out", "path": "s3://bucket/events/"}]))
    two = [lake, {"type": "files", "name": "out", "path": "s3://bucket/events-copy"}]
    assert len(parse_config(base(sinks=two, checkpoint="s3://bucket/c")).sinks) == 2
    # Sinks that share by design: fake queues in one directory, Delta sinks into one table.
    fakes = [{"type": "fake", "name": f"f{i}", "path": "q", "queue": f"q{i}"} for i in (1, 2)]
    assert len(parse_config(base(sinks=fakes)).sinks) == 2


def test_an_env_reference_without_a_name_exits_2_at_load_naming_the_key(tmp_path, capsys):
    from ingest.run import main

    (tmp_path / "job.yaml").write_text(yaml.safe_dump(base(checkpoint="${env:}")))
    assert main(["--config", str(tmp_path / "job.yaml")]) == 2
    [line] = _error_lines(capsys)
    expected = f"error: {tmp_path / 'job.yaml'}: checkpoint: '${{env:}}' names no environment variable"
    assert line.startswith(expected), line
    for bad in ("${env:1X}", "x${env:OK", "${env: A}"):
        with pytest.raises(ConfigError, match=r"^<dict>: state\.path: .* names no environment variable"):
            parse_config(base(state={"path": bad}))


def test_a_config_error_names_file_and_key_on_its_one_error_line(tmp_path, capsys):
    from ingest.run import main

    (tmp_path / "job.yaml").write_text(yaml.safe_dump(base(trigger={"mode": "sometimes"}, stagin={})))
    assert main(["--config", str(tmp_path / "job.yaml")]) == 2
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: {tmp_path / 'job.yaml'}: stagin: Extra inputs") or line.startswith(
        f"error: {tmp_path / 'job.yaml'}: trigger.mode: Input should be 'processing_time'"
    ), err
    assert "stagin" in err and "trigger.mode" in err  # the other bad key on the next line


BOMB = "name: j\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n" for p, k in zip("abcdefgh", "bcdefghi", strict=True)
)
"""Ten lines standing for 9^9 (387 million) strings through nested aliases."""

BOUNDED_CHECK = """
import resource, sys
limit = 512 * 2**20  # address space: what the check may use; CPU seconds: a bound on a runaway
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
from ingest.cli import main
sys.exit(main(["check", "--config", sys.argv[1]]))
"""


def test_a_yaml_alias_bomb_is_refused_naming_the_key_within_a_memory_bound(tmp_path):
    """In a child process under 512 MiB of address space: expanded, the aliases would need many GiB."""
    (tmp_path / "job.yaml").write_text(BOMB)
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED_CHECK, str(tmp_path / "job.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    bomb = "its YAML aliases expand to more than 100,000 values (an alias bomb?)"
    assert line == f"error: {tmp_path / 'job.yaml'}: f: {bomb}"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("name: j\nx: &x [*x]\n", "an alias refers to a node that contains it"),
        ("name: j\nx: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_a_self_containing_alias_or_deep_nesting_is_one_error_naming_the_file(tmp_path, text, why):
    (tmp_path / "job.yaml").write_text(text)
    with pytest.raises(ConfigError, match=rf"^invalid YAML in {tmp_path / 'job.yaml'}: {why}$"):
        load_config(tmp_path / "job.yaml")


def test_aliases_within_the_bound_load_as_written(tmp_path):
    """2,000 uses of a 39-value list: 80,001 values expanded, under the bound of 100,000."""
    from ingest.config import read_yaml

    (tmp_path / "x.yaml").write_text(
        "a: &a [" + ", ".join(["v"] * 39) + "]\nb: [" + ", ".join(["*a"] * 2000) + "]\n"
    )
    data = read_yaml(tmp_path / "x.yaml", "config")
    assert len(data["b"]) == 2000 and data["b"][1999] == ["v"] * 39


def test_a_merge_key_takes_the_anchored_mapping_and_a_key_given_twice_is_still_refused(tmp_path):
    """``<<: *base`` is YAML's way to share options between sinks: the loader that refuses a
    duplicate key refused every merge key ("could not determine a constructor")."""
    from ingest.config import read_yaml

    (tmp_path / "x.yaml").write_text(
        "sinks:\n"
        "  - &files {type: files, name: a, path: /data/a, format: json}\n"
        "  - {<<: *files, name: b, path: /data/b}\n"
    )
    assert read_yaml(tmp_path / "x.yaml", "config")["sinks"][1] == {
        "type": "files",
        "name": "b",
        "path": "/data/b",
        "format": "json",
    }
    (tmp_path / "y.yaml").write_text("base: &b {k: 1}\nm: {<<: *b, j: 1, j: 2}\n")
    with pytest.raises(ConfigError, match=r"line 2, column 19: duplicate key 'j'"):
        read_yaml(tmp_path / "y.yaml", "config")
