"""SQS error codes, as the boto3 and awscrt clients report them: which are fatal, which retryable."""

from __future__ import annotations

from typing import Any

from ingest.errors import FatalError, TransientError, error_code, redact

FATAL_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "InvalidSecurity",
        "ExpiredToken",
        "ExpiredTokenException",
        "MissingAuthenticationToken",
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "InvalidAddress",
        "UnsupportedOperation",
    }
)
RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "AWS.SimpleQueueService.RequestThrottled",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "KmsThrottled",
        "OverLimit",  # too many in-flight messages: clears as acks land
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
_FINAL_ENTRY_CODES = frozenset({
    "ReceiptHandleIsInvalid", "InvalidReceiptHandle", "MessageNotInflight", "InvalidMessageContents",
    "MessageTooLong", "InvalidParameterValue", "InvalidAttributeName", "InvalidAttributeValue",
    "MissingParameter", "InvalidIdFormat",
})  # fmt: skip
"""Entry errors that no retry can fix, whatever ``SenderFault`` says (LocalStack sets it false)."""


def entry_is_final(failed: dict[str, Any]) -> bool:
    """Whether a ``Failed`` entry of a ``*Batch`` reply is final (the caller's fault): no re-send."""
    code = str(failed.get("Code", "")).rsplit(".", 1)[-1]
    return bool(failed.get("SenderFault")) or code in _FINAL_ENTRY_CODES


def classify(err: Exception, queue_url: str, action: str) -> Exception:
    """Map a boto3/botocore error to ``FatalError`` (stop, say why) or ``TransientError`` (retry).

    Fatal: credentials missing or wrong, access denied, missing queue, and any other 4xx
    that is not throttling (the same request would fail again). Transient: throttling,
    5xx, connection errors and timeouts. The message names the queue URL, the action and
    the AWS error code, and is redacted: never a credential. Other exceptions come back
    unchanged.
    """
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    where = f"SQS {action} on {queue_url}"
    if isinstance(err, (NoCredentialsError, PartialCredentialsError, ProfileNotFound)):
        return FatalError(redact(f"{where}: credentials: {err}"))
    if isinstance(err, ParamValidationError):
        return FatalError(redact(f"{where}: invalid request: {err}"))
    if isinstance(err, ClientError):
        code, message, status = error_code(err)
        query_code = err.response.get("Error", {}).get("QueryErrorCode", "")
        text = redact(f"{where} failed: {code} (HTTP {status}): {message}")
        if {code, query_code} & RETRYABLE_CODES or status >= 500 or status == 429:
            return TransientError(text)
        if {code, query_code} & FATAL_CODES or 400 <= status < 500:
            return FatalError(text)
        return TransientError(text)
    if isinstance(err, BotoCoreError):
        return TransientError(redact(f"{where}: {type(err).__name__}: {err}"))
    return err
