"""Helpers for MNS tests on the emulator: queues, send/drain through the real SDK, source and sink configs."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from typing import Any

from sinks.mns.config import MnsSinkConfig
from sources.mns.config import MnsSourceConfig
from tests.support.polling import wait_for

AK_ID = "test-ak-id"
AK_SECRET = "test-ak-secret-5f3c9e"


def account(url: str, secret: str = AK_SECRET) -> Any:
    from mns.account import Account

    return Account(url, AK_ID, secret)


def create_queue(url: str, **attributes: int) -> str:
    """A fresh queue (``visibility_timeout=2`` etc., as QueueMeta attributes); its name."""
    from mns.queue import QueueMeta

    name = f"q-{uuid.uuid4().hex[:10]}"
    meta = QueueMeta()
    for key, value in attributes.items():
        setattr(meta, key, value)
    account(url).get_queue(name).create(meta)
    return name


def send_bodies(url: str, queue: str, bodies: Iterable[str], encode: bool = True) -> None:
    """Put ``bodies`` on the queue with BatchSendMessage, 16 per call (base64 unless ``encode`` is off)."""
    from mns.queue import Message

    q = account(url).get_queue(queue)
    q.set_encoding(encode)
    bodies = list(bodies)
    for start in range(0, len(bodies), 16):
        q.batch_send_message([Message(b) for b in bodies[start : start + 16]])


def drain(url: str, queue: str, raw: bool = False) -> list[Any]:
    """Receive and delete everything visible: decoded bodies, or the SDK messages with ``raw``."""
    from mns.mns_exception import MNSServerException

    q = account(url).get_queue(queue)
    q.set_encoding(False)
    out: list[Any] = []
    while True:
        try:
            msgs = q.batch_receive_message(16, 0)
        except MNSServerException as err:
            if err.type == "MessageNotExist":
                return out
            raise
        q.batch_delete_message([m.receipt_handle for m in msgs])
        out += msgs if raw else [base64.b64decode(m.message_body).decode() for m in msgs]


def depth(url: str, queue: str) -> int:
    """Messages in the queue, visible or not (the low-level call: Queue.get_attributes warns)."""
    from mns.mns_request import GetQueueAttributesRequest, GetQueueAttributesResponse

    resp = GetQueueAttributesResponse()
    account(url).get_client().get_queue_attributes(GetQueueAttributesRequest(queue), resp)
    return resp.active_messages + resp.inactive_messages + resp.delay_messages


def wait_all_visible(url: str, queue: str, timeout: float = 60.0) -> None:
    """Poll until no message of ``queue`` is hidden (a killed job's receives timed out)."""
    from mns.mns_request import GetQueueAttributesRequest, GetQueueAttributesResponse

    def hidden() -> int:
        resp = GetQueueAttributesResponse()
        account(url).get_client().get_queue_attributes(GetQueueAttributesRequest(queue), resp)
        return resp.inactive_messages

    wait_for(lambda: hidden() == 0, timeout, f"every message of MNS queue {queue} visible again", every=0.2)


def source_cfg(url: str, queue: str, **options: Any) -> MnsSourceConfig:
    base = {"type": "mns", "name": "src", "endpoint": url, "queueName": queue}
    base |= {"accessKeyId": AK_ID, "accessKeySecret": AK_SECRET, "batchSize": 16, "pollingWaitTime": 1}
    return MnsSourceConfig.model_validate(base | options)


def sink_cfg(url: str, queue: str, **options: Any) -> MnsSinkConfig:
    base = {"type": "mns", "name": "out", "endpoint": url, "queueName": queue}
    return MnsSinkConfig.model_validate(base | {"accessKeyId": AK_ID, "accessKeySecret": AK_SECRET} | options)
