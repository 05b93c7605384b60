"""AWS's Python SQS Extended Client, run in a child process, for claim-check interop tests.

Importing ``sqs_extended_client`` replaces ``boto3.Session`` for the whole process (its receive
then fetches any pointer it sees), so it must never be imported into the test process itself:
``send`` and ``receive`` run it with ``python -m tests.support.extended_client``.

Usage (child side): ``python -m tests.support.extended_client send|receive`` with a JSON
request on stdin and a JSON answer on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(command: str, request: dict[str, Any]) -> Any:
    env = os.environ | {
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": _ROOT,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.extended_client", command],
        input=json.dumps(request).encode(),
        capture_output=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"extended client {command} failed: {done.stderr.decode()[-2000:]}")
    return json.loads(done.stdout)


def send(endpoint: str, queue_url: str, bucket: str, bodies: list[str], always: bool = False) -> list[str]:
    """Send ``bodies`` through the Extended Client (payloads over 256 KiB, or all with ``always``,
    go to ``bucket``); return the message ids."""
    request = {"endpoint": endpoint, "queue_url": queue_url, "bucket": bucket, "bodies": bodies}
    return _run("send", request | {"always": always})


def receive(
    endpoint: str, queue_url: str, bucket: str, expect: int, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Receive (and delete, which deletes the payload objects too) up to ``expect`` messages through
    the Extended Client; return ``{"id", "body", "attributes"}`` per message, payloads resolved."""
    request = {"endpoint": endpoint, "queue_url": queue_url, "bucket": bucket}
    return _run("receive", request | {"expect": expect, "timeout": timeout})


def _client(req: dict[str, Any]) -> Any:
    import boto3
    import sqs_extended_client  # noqa: F401  (patches boto3.Session in this child only)

    sqs = boto3.session.Session().client("sqs", endpoint_url=req["endpoint"], region_name="us-east-1")
    sqs.large_payload_support = req["bucket"]
    sqs.always_through_s3 = bool(req.get("always"))
    sqs.delete_payload_from_s3 = True
    sqs.s3_client = boto3.client("s3", endpoint_url=req["endpoint"], region_name="us-east-1")
    return sqs


def _child(command: str) -> None:
    import time

    req = json.load(sys.stdin)
    sqs = _client(req)
    if command == "send":
        ids = [sqs.send_message(QueueUrl=req["queue_url"], MessageBody=b)["MessageId"] for b in req["bodies"]]
        json.dump(ids, sys.stdout)
        return
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + req["timeout"]
    while len(got) < req["expect"] and time.monotonic() < deadline:
        ask = {"MaxNumberOfMessages": 10, "WaitTimeSeconds": 1, "MessageAttributeNames": ["All"]}
        resp = sqs.receive_message(QueueUrl=req["queue_url"], **ask)
        for m in resp.get("Messages", []):
            attrs = {k: v.get("StringValue") for k, v in m.get("MessageAttributes", {}).items()}
            got.append({"id": m["MessageId"], "body": m["Body"], "attributes": attrs})
            sqs.delete_message(QueueUrl=req["queue_url"], ReceiptHandle=m["ReceiptHandle"])
    json.dump(got, sys.stdout)


if __name__ == "__main__":
    _child(sys.argv[1])
