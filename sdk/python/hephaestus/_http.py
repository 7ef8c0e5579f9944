"""The HTTP transport: urllib, a bearer token, JSON bodies, and problem
answers raised as exceptions (errors.py)."""

import datetime
import http.client
import json
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from ._version import __version__
from .errors import ConnectionFailed, HephError, error_for

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ns": 1e-9}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


def parse_duration(d: Union[str, int, float]) -> float:
    """Seconds of a Go duration string ("30s", "1m30s", "500ms"), or of a
    number of seconds. Raises ValueError for anything else."""
    if isinstance(d, bool):
        raise ValueError("bad duration %r" % (d,))
    if isinstance(d, (int, float)):
        return float(d)
    if not isinstance(d, str):
        raise ValueError("bad duration %r: want a string such as \"30s\" or seconds" % (d,))
    s = d.strip()
    sign = 1.0
    if s[:1] in "+-" and s:
        sign, s = (-1.0 if s[0] == "-" else 1.0), s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(s):
        m = _DURATION.match(s, pos)
        if not m:
            raise ValueError("bad duration %r: want a Go duration such as \"30s\", \"1m30s\" or \"500ms\"" % d)
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError("bad duration %r" % d)
    return sign * total


def format_duration(d: Union[str, int, float, datetime.timedelta]) -> str:
    """A Go duration string for seconds, a timedelta, or a string (checked)."""
    if isinstance(d, datetime.timedelta):
        d = d.total_seconds()
    if isinstance(d, str):
        parse_duration(d)
        return d
    secs = parse_duration(d)
    ms = int(round(secs * 1000))
    if ms % 1000 == 0:
        return "%ds" % (ms // 1000)
    return "%dms" % ms


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, datetime.timedelta):
        return format_duration(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def encode_query(query: Optional[Mapping[str, Any]]) -> str:
    """The query string: None values left out, lists and tuples repeated."""
    if not query:
        return ""
    pairs: List[Tuple[str, str]] = []
    for k, v in query.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple, set, frozenset)):
            for item in v:
                if item is not None:
                    pairs.append((k, _query_value(item)))
        else:
            pairs.append((k, _query_value(v)))
    return urllib.parse.urlencode(pairs)


class Response(NamedTuple):
    status: int
    headers: Dict[str, str]
    body: Any


def normalize_addr(addr: str) -> str:
    """http://host:port for "host:port" or a URL; ValueError otherwise."""
    if not isinstance(addr, str) or not addr.strip():
        raise ValueError("addr must be the server's URL, such as http://127.0.0.1:7070; got %r" % (addr,))
    a = addr.strip().rstrip("/")
    if "://" not in a:
        a = "http://" + a
    u = urllib.parse.urlsplit(a)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ValueError("addr must be an http or https URL, such as http://127.0.0.1:7070; got %r" % (addr,))
    return a


class Transport:
    """Sends requests to a server: the base of Client."""

    def __init__(self, addr: str, token: Optional[str] = None, timeout: float = 30.0,
                 user_agent: Optional[str] = None) -> None:
        self.addr = normalize_addr(addr)
        if token is not None and not isinstance(token, str):
            raise ValueError("token must be a string")
        self.token = token or None
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds; got %r" % (timeout,))
        self.timeout = float(timeout)
        self.user_agent = user_agent or "hephaestus-python/%s" % __version__

    def _call(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None, body: Any = None,
              headers: Optional[Mapping[str, Optional[str]]] = None,
              timeout: Optional[float] = None) -> Response:
        """Sends one request; answers its status, headers and decoded body
        (JSON, else text, None when empty) for a 2xx or 3xx answer, and
        raises a HephError for an error answer or none."""
        url = self.addr + path
        qs = encode_query(query)
        if qs:
            url += "?" + qs
        data = None
        hdrs = {"Accept": "application/json, application/problem+json;q=0.9, */*;q=0.1",
                "User-Agent": self.user_agent}
        if body is not None:
            if isinstance(body, (bytes, bytearray)):
                data = bytes(body)
            else:
                try:
                    data = json.dumps(body, separators=(",", ":")).encode("utf-8")
                except (TypeError, ValueError) as e:
                    raise ValueError("%s %s: the body is not JSON: %s" % (method, path, e)) from None
            hdrs["Content-Type"] = "application/json"
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        for k, v in (headers or {}).items():
            if v is not None:
                hdrs[k] = str(v)
        if timeout is None:
            timeout = self.timeout
            if query and query.get("wait") is not None:
                try:
                    timeout += parse_duration(query["wait"])
                except ValueError:
                    pass
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                return Response(resp.status, dict(resp.headers.items()), self._decode(method, path, resp.headers, raw))
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            problem = self._problem(e.headers, raw, e.code, e.reason)
            raise error_for(e.code, problem, method, path) from None
        except urllib.error.URLError as e:
            raise ConnectionFailed("%s %s: cannot reach %s: %s" % (method, path, self.addr, e.reason),
                                   method=method, path=path) from None
        except (socket.timeout, TimeoutError) as e:
            raise ConnectionFailed("%s %s: no answer from %s within %.0fs" % (method, path, self.addr, timeout),
                                   method=method, path=path) from None
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed("%s %s: %s: %s" % (method, path, type(e).__name__, e),
                                   method=method, path=path) from None

    def _request(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None, body: Any = None,
                 headers: Optional[Mapping[str, Optional[str]]] = None) -> Any:
        """Sends one request and answers its decoded body (see _call)."""
        return self._call(method, path, query=query, body=body, headers=headers).body

    @staticmethod
    def _decode(method: str, path: str, headers: Any, raw: bytes) -> Any:
        if not raw:
            return None
        ctype = (headers.get("Content-Type") or "").lower()
        text = raw.decode("utf-8", errors="replace")
        if "json" in ctype:
            try:
                return json.loads(text)
            except ValueError as e:
                raise HephError("%s %s: the answer is not JSON: %s" % (method, path, e),
                                method=method, path=path) from None
        return text

    @staticmethod
    def _problem(headers: Any, raw: bytes, status: int, reason: str) -> Dict[str, Any]:
        text = raw.decode("utf-8", errors="replace") if raw else ""
        if text:
            try:
                p = json.loads(text)
                if isinstance(p, dict):
                    return p
            except ValueError:
                pass
        return {"status": status, "title": str(reason or ""), "detail": text.strip()[:500]}
