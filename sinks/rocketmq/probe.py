"""Asks a RocketMQ cluster why a send failed: refused credentials, a missing topic, or no answer.

Both clients drop the reason a name server, broker or proxy gave: the native one reports
"No route info of this topic", the gRPC one "failed to fetch topic route". These probes
repeat the first requests the client makes, signed the same way, and read the answer.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import orjson

from sinks.rocketmq import wire
from sinks.rocketmq.config import RocketMqSinkConfig


class Diagnosis(NamedTuple):
    """Why sends fail: ``fatal`` ones (credentials, topic) fail the batch at once."""

    fatal: bool
    reason: str


def credentials(cfg: RocketMqSinkConfig) -> tuple[str, str] | None:
    """(accessId, accessKey) when both are set."""
    if cfg.access_id and cfg.access_key:
        return cfg.access_id, cfg.access_key.get_secret_value()
    return None


def _refused(cfg: RocketMqSinkConfig, who: str, code: int | str, remark: str) -> Diagnosis:
    return Diagnosis(True, f"{who} refused the credentials of accessId {cfg.access_id!r} ({code}: {remark})")


def probe_remoting(cfg: RocketMqSinkConfig, topic: str, group: str) -> Diagnosis | None:
    """A signed route query to each name server, then a heartbeat to the topic's broker."""
    creds, timeout = credentials(cfg), min(cfg.send_timeout, 5.0)
    silent = []
    for server in (s.strip() for s in cfg.endpoint.removeprefix("http://").split(";")):
        try:
            frame = wire.request(wire.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, credentials=creds)
            code, remark, body = wire.call(server, frame, timeout)
        except (OSError, wire.WireError, ValueError) as err:
            silent.append(f"name server {server}: {err or type(err).__name__}")
            continue
        if code == wire.TOPIC_NOT_EXIST:
            return Diagnosis(True, f"topic {topic} does not exist (name server {server}: {remark})")
        if code == wire.NO_PERMISSION or _sounds_like_acl(remark):
            return _refused(cfg, f"RocketMQ name server {server}", code, remark)
        if code != wire.SUCCESS:
            return Diagnosis(False, f"name server {server} answered {code}: {remark}")
        route = orjson.loads(body)
        masters = [
            a for b in route.get("brokerDatas", []) for i, a in b.get("brokerAddrs", {}).items() if i == "0"
        ]
        return _probe_broker(cfg, masters[0], group, creds, timeout) if masters else None
    return Diagnosis(False, "; ".join(silent)) if silent else None


def _probe_broker(
    cfg: RocketMqSinkConfig, broker: str, group: str, creds: tuple[str, str] | None, timeout: float
) -> Diagnosis | None:
    client = f"mq-ingest-probe@{os.getpid()}"
    beat = {"clientID": client, "producerDataSet": [{"groupName": group}], "consumerDataSet": []}
    try:
        code, remark, _ = wire.call(
            broker, wire.request(wire.HEART_BEAT, {}, orjson.dumps(beat), creds), timeout
        )
        if code == wire.SUCCESS:
            fields = {"clientID": client, "producerGroup": group, "consumerGroup": ""}
            wire.call(broker, wire.request(wire.UNREGISTER_CLIENT, fields, credentials=creds), timeout)
            return None
    except (OSError, wire.WireError) as err:
        return Diagnosis(False, f"broker {broker}: {err or type(err).__name__}")
    if code == wire.NO_PERMISSION or _sounds_like_acl(remark):
        return _refused(cfg, f"RocketMQ broker {broker}", code, remark)
    return Diagnosis(False, f"broker {broker} answered {code}: {remark}")


def _sounds_like_acl(remark: str) -> bool:
    lowered = remark.lower()
    return any(w in lowered for w in ("signature", "accesskey", "aclexception"))


def probe_grpc(cfg: RocketMqSinkConfig, configuration) -> Diagnosis | None:
    """A QueryRoute call signed as the 5.x client signs it (``configuration`` is its ClientConfiguration)."""
    import grpc
    from rocketmq.grpc_protocol import Code, MessagingServiceStub, QueryRouteRequest
    from rocketmq.v5.util import ClientId, Signature

    req = QueryRouteRequest()
    req.topic.name, req.topic.resource_namespace = cfg.topic, configuration.namespace
    req.endpoints.CopyFrom(configuration.rpc_endpoints.endpoints)
    timeout = min(cfg.send_timeout, 5.0)
    try:
        with grpc.insecure_channel(cfg.endpoint.removeprefix("http://")) as channel:
            metadata = Signature.metadata(configuration, ClientId().client_id)
            res = MessagingServiceStub(channel).QueryRoute(req, metadata=metadata, timeout=timeout)
    except grpc.RpcError as err:
        code = err.code().name if hasattr(err, "code") else type(err).__name__
        return Diagnosis(False, f"the proxy did not answer a route query within {timeout:g}s ({code})")
    status = res.status
    if status.code in (Code.UNAUTHORIZED, Code.FORBIDDEN):
        return _refused(cfg, "the proxy", Code.Name(status.code), status.message)
    if status.code in (Code.TOPIC_NOT_FOUND, Code.NOT_FOUND):
        return Diagnosis(True, f"topic {cfg.topic} does not exist ({status.message})")
    if status.code != Code.OK:
        return Diagnosis(False, f"the proxy answered {Code.Name(status.code)}: {status.message}")
    return None
