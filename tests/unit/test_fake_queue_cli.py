"""Tools around the fake queue: the demo seeding of the local job and the ``ingest.tools.fakeq`` CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson

from sources.fake.config import FakeSeed
from sources.fake.source import seed_demo
from sources.fake.store import FakeQueue

ROOT = Path(__file__).resolve().parents[2]


def test_seed_demo(tmp_path):
    q = FakeQueue(str(tmp_path), "demo")
    assert seed_demo(q, FakeSeed(messages=30, duplicates=4, malformed=3)) == {
        "messages": 30,
        "duplicates": 4,
        "malformed": 3,
    }
    msgs = q.peek(100)
    assert len(msgs) == 37 and len({m.message_id for m in msgs}) == 33
    good, bad = [], []
    for m in msgs:
        try:
            good.append((m.message_id, orjson.loads(m.body)))
        except orjson.JSONDecodeError:
            bad.append(m)
    assert len(bad) == 3 and len(good) == 34
    events = dict(good)
    assert sorted(e["event_id"] for e in events.values()) == list(range(30))
    for e in events.values():
        assert set(e) == {"event_id", "user_id", "action", "amount", "ts"} and e["action"] in (
            "click",
            "view",
            "purchase",
        )
        assert isinstance(e["user_id"], int) and isinstance(e["amount"], float)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["ts"])
    for mid, body in good:  # the duplicates are copies of an original: same id, same body
        assert body == events[mid]
    assert seed_demo(q, FakeSeed(messages=30)) == {"messages": 0, "duplicates": 0, "malformed": 0}
    other = FakeQueue(str(tmp_path), "again", fifo=True)
    assert seed_demo(other, FakeSeed(messages=30, duplicates=4, malformed=3))["messages"] == 30
    assert other.count()["total"] == 37  # FIFO dedup swallows none of them
    assert sorted(m.body for m in other.peek(100)) == sorted(m.body for m in msgs)  # deterministic


def cli(
    tmp_path: Path, *args: str, stdin: str | None = None, queue: str = "c"
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ingest.fakeq", "--path", str(tmp_path / "qs"), "--queue", queue, *args]
    return subprocess.run(cmd, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60)


def test_cli_send_peek_count_purge(tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text('{"a": 1}\n\n{"a": "ü"}\n')
    assert cli(tmp_path, "send", "--file", str(f)).stdout == "sent 2 message(s) to c\n"
    assert cli(tmp_path, "send", stdin='{"a": 3}\n').stdout == "sent 1 message(s) to c\n"
    env = '{"body": "x", "message_attributes": {"k": "v"}, "delay_seconds": 0}\n'
    assert cli(tmp_path, "send", "--envelope", stdin=env).returncode == 0
    assert orjson.loads(cli(tmp_path, "count").stdout) == {
        "visible": 4,
        "in_flight": 0,
        "delayed": 0,
        "total": 4,
    }
    peeked = [orjson.loads(line) for line in cli(tmp_path, "peek", "-n", "10").stdout.splitlines()]
    assert [p["body"] for p in peeked] == ['{"a": 1}', '{"a": "ü"}', '{"a": 3}', "x"]
    assert peeked[3]["message_attributes"] == {"k": "v"} and peeked[0]["receive_count"] == 0
    assert len(cli(tmp_path, "peek", "-n", "2").stdout.splitlines()) == 2
    assert cli(tmp_path, "purge").stdout == "purged 4 message(s) from c\n"
    assert orjson.loads(cli(tmp_path, "count").stdout)["total"] == 0


def test_cli_bad_line_names_file_and_line_and_sends_nothing(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"body": "ok"}\n{"nobody": 1}\n')
    r = cli(tmp_path, "send", "--envelope", "--file", str(f))
    assert r.returncode == 2 and f"{f}:2:" in r.stderr and "body" in r.stderr
    r = cli(
        tmp_path, "send", "--envelope", stdin='{"body": "ok"}\n\n{"body": "x", "delay_seconds": "soon"}\n'
    )
    assert r.returncode == 2 and "<stdin>:3: delay_seconds" in r.stderr
    assert orjson.loads(cli(tmp_path, "count").stdout)["total"] == 0
    r = cli(tmp_path, "--fifo", "send", stdin="a\nb\n", queue="f")
    assert r.returncode == 2 and "<stdin>:1:" in r.stderr and "--group" in r.stderr
    r = cli(tmp_path, "--fifo", "send", "--group", "g", stdin="a\nb\na\n", queue="f")
    assert r.stdout == "sent 3 message(s) to f (1 deduplicated: already sent within 5 minutes)\n"
    r = cli(tmp_path, "count", queue="f")  # a FIFO queue opened as a standard one
    assert r.returncode == 2 and "holds a FIFO queue" in r.stderr


def test_a_queue_name_cannot_escape_the_path(tmp_path, capsys):
    from ingest.tools.fakeq import main

    for name in ("../x", "a/b", "..", ""):
        assert main(["--path", str(tmp_path / "q"), "--queue", name, "count"]) == 2
        assert "error: --queue: queue name" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.db"))


def test_reading_a_queue_that_does_not_exist_is_an_error_and_creates_nothing(tmp_path):
    cli(tmp_path, "send", stdin='{"a": 1}\n', queue="events")
    db = tmp_path / "qs" / "evnts.db"
    for args in (["count"], ["peek", "-n", "5"], ["purge"]):
        r = cli(tmp_path, *args, queue="evnts")  # a mistyped name
        assert r.returncode == 2 and r.stdout == "", (args, r.stdout, r.stderr)
        assert r.stderr == f"error: queue evnts does not exist: no file {db} (send creates it)\n", args
        assert not db.exists(), args
    assert sorted(p.name for p in (tmp_path / "qs").glob("*.db")) == ["events.db"]
    assert orjson.loads(cli(tmp_path, "count", queue="events").stdout)["total"] == 1
    assert cli(tmp_path, "send", stdin='{"a": 2}\n', queue="evnts").returncode == 0  # send creates it
    assert orjson.loads(cli(tmp_path, "count", queue="evnts").stdout)["total"] == 1
