"""Hephaestus for Go: the Python SDK.

    from hephaestus import Client, Worker

Client speaks the HTTP API of `heph server` (every operation, plus
helpers to start runs and wait for their results); Worker runs the
actions, remote flow steps and workflow activities the server hands out
(the worker protocol). Standard library only.
"""

from ._version import __version__
from .client import Client
from .errors import (
    BadRequest,
    Conflict,
    ConnectionFailed,
    Forbidden,
    GatewayTimeout,
    HephError,
    LeaseLost,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    ResultTimeout,
    RunCancelled,
    RunFailed,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from .worker import (
    MAX_ATTRS,
    MAX_BUFFERED,
    MAX_MESSAGE,
    MAX_PER_REQUEST,
    NonRetryable,
    Retryable,
    Task,
    Worker,
    log_record,
)

__all__ = [
    "__version__",
    "BadRequest",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "GatewayTimeout",
    "HephError",
    "LeaseLost",
    "MAX_ATTRS",
    "MAX_BUFFERED",
    "MAX_MESSAGE",
    "MAX_PER_REQUEST",
    "MethodNotAllowed",
    "NonRetryable",
    "NotFound",
    "PayloadTooLarge",
    "ResultTimeout",
    "Retryable",
    "RunCancelled",
    "RunFailed",
    "ServerError",
    "Task",
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "Worker",
    "log_record",
]
