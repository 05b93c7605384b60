"""A delivery channel's sender thread never dies silently: an error of its own is logged and it goes on."""

from __future__ import annotations

import logging
import time

from ingest.config.job_events import FileTarget
from ingest.ops.job_events.channels import FileChannel
from ingest.ops.job_events.sender import Sender
from tests.support.polling import wait_for


def test_an_error_outside_the_send_is_logged_and_the_sender_goes_on(tmp_path, caplog):
    target = FileTarget(type="file", path=str(tmp_path / "events.jsonl"), batch_size=1, linger=0)
    broken = {"left": 1}
    counted: list[tuple[str, str, int]] = []

    def on_count(kind: str, channel: str, n: int) -> None:  # e.g. the metrics it reports into
        counted.append((kind, channel, n))
        if broken["left"]:
            broken["left"] -= 1
            raise RuntimeError("metrics registry broken")

    sender = Sender(FileChannel(target, "file"), target, on_count)
    sender.start()
    with caplog.at_level(logging.ERROR, logger="ingest.ops.job_events.delivery"):
        sender.offer({"n": 1})
        wait_for(lambda: sender.errors == 1, 10, "the error counted")
        sender.offer({"n": 2})
        wait_for(lambda: sender.counts["delivered"] == 2, 10, "a delivery after the error")
    assert sender.thread.running
    assert ("errors", "file", 1) in counted, "the error reaches the job's metrics (deliveryErrors)"
    assert "delivery file: sender error" in caplog.text and "metrics registry broken" in caplog.text
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == 2, "the batch whose count failed was still written, and the next one too"
    sender.close(time.monotonic() + 5)
    assert not sender.thread.running
