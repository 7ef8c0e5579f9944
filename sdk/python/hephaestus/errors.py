"""Exceptions of the Hephaestus SDK.

Every error answer of the server is an RFC 9457 problem
(application/problem+json); the SDK raises it as a HephError subclass
chosen by its status (and, for 409 lease-lost, its type).
"""

from typing import Any, Dict, List, Optional


class HephError(Exception):
    """An error answer of the server, or a failure to reach it.

    status is the HTTP status (0 when no answer came), type, title,
    detail, fix and errors the problem's members, method and path the
    request's.
    """

    def __init__(
        self,
        message: str = "",
        *,
        status: int = 0,
        type: str = "",
        title: str = "",
        detail: str = "",
        fix: str = "",
        errors: Optional[List[Dict[str, Any]]] = None,
        instance: str = "",
        method: str = "",
        path: str = "",
        problem: Optional[Dict[str, Any]] = None,
    ) -> None:
        if not message:
            message = detail or title or "HTTP %d" % status
            if method or path:
                message = "%s %s: %d %s: %s" % (method, path, status, title or "error", detail or title)
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.fix = fix
        self.errors = errors or []
        self.instance = instance
        self.method = method
        self.path = path
        self.problem = problem or {}


class BadRequest(HephError):
    """400: a body or parameter that does not decode or validate."""


class Unauthorized(HephError):
    """401: no token, an unknown, revoked or disabled one."""


class Forbidden(HephError):
    """403: the token's role does not admit the call."""


class NotFound(HephError):
    """404: no run, definition, document, ... of that name."""


class MethodNotAllowed(HephError):
    """405: the path does not take the method."""


class Conflict(HephError):
    """409: the run finished, is not waiting, a duplicate id, ..."""


class LeaseLost(Conflict):
    """409 lease-lost: the server no longer accepts this worker's answer
    for a task (its lease expired and another worker took it over, or
    the attempt ended); nothing was written."""


class PayloadTooLarge(HephError):
    """413: a body above the server's limit."""


class Unprocessable(HephError):
    """422: an invalid flow document; an update or query handler failed."""


class TooManyRequests(HephError):
    """429: rate limited."""


class ServerError(HephError):
    """500 and other 5xx answers without a class of their own."""


class Unavailable(ServerError):
    """503: the server's store or client is closed."""


class GatewayTimeout(ServerError):
    """504: the server's request timeout passed."""


class ConnectionFailed(HephError):
    """The server did not answer: refused, reset, timed out, unreachable."""


class RunFailed(HephError):
    """Client.result: the run failed. run is the run, error its error."""

    def __init__(self, run: Dict[str, Any]) -> None:
        err = str(run.get("error") or "")
        super().__init__("run %s %s: %s" % (run.get("id", ""), run.get("status", "failed"), err or "(no error)"),
                         detail=err)
        self.run = run
        self.run_id = str(run.get("id", ""))
        self.error = err


class RunCancelled(RunFailed):
    """Client.result: the run was cancelled."""


class ResultTimeout(HephError, TimeoutError):
    """Client.result: the run did not end within the timeout."""


_BY_STATUS = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    422: Unprocessable,
    429: TooManyRequests,
    500: ServerError,
    503: Unavailable,
    504: GatewayTimeout,
}


def error_for(status: int, problem: Dict[str, Any], method: str = "", path: str = "") -> HephError:
    """The exception for an error answer with the decoded problem body."""
    ptype = str(problem.get("type") or "")
    if status == 409 and ptype.endswith("/lease-lost"):
        cls = LeaseLost  # type: type
    else:
        cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else HephError)
    errors = problem.get("errors")
    return cls(
        status=status,
        type=ptype,
        title=str(problem.get("title") or ""),
        detail=str(problem.get("detail") or ""),
        fix=str(problem.get("fix") or ""),
        errors=errors if isinstance(errors, list) else None,
        instance=str(problem.get("instance") or ""),
        method=method,
        path=path,
        problem=problem,
    )
