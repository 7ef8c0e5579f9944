"""The Hephaestus client: every API operation (generated, _operations.py)
and high-level helpers for runs, their interactions and events."""

import datetime
import json
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import Transport, format_duration, parse_duration
from ._operations import Operations, _p
from .errors import ResultTimeout, RunCancelled, RunFailed

Run = Dict[str, Any]
Duration = Union[str, int, float, datetime.timedelta]

KINDS = ("flow", "document", "workflow", "job")
ENDED = ("completed", "failed", "cancelled", "continued")


def _csv(v: Any) -> Any:
    if isinstance(v, (list, tuple, set, frozenset)):
        return ",".join(str(x) for x in v)
    return v


class Client(Transport, Operations):
    """A client of `heph server`'s HTTP API.

        c = Client("http://127.0.0.1:7070", token=os.environ["HEPH_TOKEN"])
        run = c.start("example.order", {...}, business_value="42")
        print(c.result(run["id"], timeout=60))

    Every operation of the API is a method named after its operationId
    (start_run, get_run, list_runs, ...; see _operations.py), answering
    the decoded JSON. The helpers here (start, get, result, list, ...)
    build their bodies and follow pages and long polls. Error answers
    raise the exceptions of hephaestus.errors: NotFound, BadRequest,
    Conflict, ...; a server that does not answer raises ConnectionFailed.
    """

    def __init__(self, addr: str, token: Optional[str] = None, timeout: float = 30.0,
                 user_agent: Optional[str] = None) -> None:
        Transport.__init__(self, addr, token=token, timeout=timeout, user_agent=user_agent)

    # Runs ------------------------------------------------------------

    def start(
        self,
        name: str,
        input: Any = None,
        *,
        kind: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        business_value: Optional[str] = None,
        version: Optional[int] = None,
        workflow_id: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        search_attributes: Optional[Mapping[str, Any]] = None,
        concurrency_key: Optional[str] = None,
        on_behalf_of: Optional[str] = None,
        execution_timeout: Optional[Duration] = None,
        signal: Optional[Mapping[str, Any]] = None,
        update: Optional[Mapping[str, Any]] = None,
    ) -> Run:
        """Start a run of a flow (kind "flow", the default), a stored flow
        document ("document"), a code-first workflow ("workflow", named by
        workflow_id) or a job kind ("job"; business_value is its unique
        key). business_value is the run's business key value, for a
        definition that declares a business key. A repeated start with the
        same idempotency_key answers the same run. signal or update
        ({"name", "payload"/"args", "id", ...}) make a workflow start a
        signal- or update-with-start. Answers the run."""
        if not isinstance(name, str) or not name:
            raise ValueError("start: name must be a definition's name")
        if kind is not None and kind not in KINDS:
            raise ValueError("start: kind %r: want one of %s" % (kind, ", ".join(KINDS)))
        body: Dict[str, Any] = {"name": name}
        if kind is not None:
            body["kind"] = kind
        if input is not None:
            body["input"] = input
        if isinstance(tags, str):
            raise ValueError("start: tags must be a list of strings, not a string")
        opt = {
            "business_value": business_value,
            "version": version,
            "workflow_id": workflow_id,
            "tags": list(tags) if tags is not None else None,
            "metadata": dict(metadata) if metadata is not None else None,
            "search_attributes": dict(search_attributes) if search_attributes is not None else None,
            "concurrency_key": concurrency_key,
            "on_behalf_of": on_behalf_of,
            "execution_timeout": format_duration(execution_timeout) if execution_timeout is not None else None,
            "signal": dict(signal) if signal is not None else None,
            "update": dict(update) if update is not None else None,
        }
        body.update({k: v for k, v in opt.items() if v is not None})
        return self.start_run(idempotency_key=idempotency_key, body=body)  # type: ignore[no-any-return]

    def get(self, run_id: str) -> Run:
        """A run, by id or business id (key::value), with its steps."""
        return self.get_run(run_id)  # type: ignore[no-any-return]

    def wait(self, run_id: str, timeout: Optional[Duration] = None, poll: Duration = "20s") -> Run:
        """Waits (long polls) until the run ends and answers it, whatever
        its status. Raises ResultTimeout when timeout (seconds or a
        duration; None: no bound) passes first."""
        limit = parse_duration(format_duration(timeout)) if timeout is not None else None
        step = max(parse_duration(format_duration(poll)), 1.0)
        deadline = time.monotonic() + limit if limit is not None else None
        while True:
            wait = step
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ResultTimeout("run %s did not end within %s" % (run_id, format_duration(limit or 0)))
                wait = min(step, max(left, 1.0))
            resp = self._call("GET", "/api/v1/runs/%s/result" % _p(run_id),
                              query={"wait": format_duration(int(wait))})
            run = resp.body if isinstance(resp.body, dict) else {}
            if resp.status == 200 or run.get("status") in ENDED:
                return run

    def result(self, run_id: str, timeout: Optional[Duration] = None) -> Any:
        """Waits until the run ends and answers its output. Raises RunFailed
        (with the run's error) for a failed run, RunCancelled for a
        cancelled one, ResultTimeout when timeout passes first."""
        run = self.wait(run_id, timeout=timeout)
        status = run.get("status")
        if status == "failed":
            raise RunFailed(run)
        if status == "cancelled":
            raise RunCancelled(run)
        return run.get("output")

    def list(
        self,
        *,
        status: Union[str, Sequence[str], None] = None,
        workflow: Optional[str] = None,
        kind: Optional[str] = None,
        business_id: Optional[str] = None,
        queue: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        q: Optional[str] = None,
        where: Optional[str] = None,
        created_after: Optional[datetime.datetime] = None,
        created_before: Optional[datetime.datetime] = None,
        version: Optional[int] = None,
        parent: Optional[str] = None,
        build: Optional[str] = None,
        ids: Optional[Sequence[str]] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        page_size: int = 100,
        limit: Optional[int] = None,
    ) -> Iterator[Run]:
        """Iterates over the runs the filters keep, newest first, following
        the pages' cursors; limit bounds how many it yields. metadata keeps
        the runs whose metadata has each key with that value."""
        if isinstance(tags, str):
            raise ValueError("list: tags must be a list of strings, not a string")
        query: Dict[str, Any] = {
            "status": _csv(status), "workflow": workflow, "kind": kind, "business_id": business_id,
            "queue": queue, "tag": list(tags) if tags else None, "q": q, "where": where,
            "created_after": created_after, "created_before": created_before, "version": version,
            "parent": parent, "build": build, "id": _csv(ids) if ids else None,
        }
        for k, v in (metadata or {}).items():
            query["meta." + k] = v if isinstance(v, str) else _json(v)
        yielded = 0
        cursor = None
        while True:
            n = page_size if limit is None else min(page_size, limit - yielded)
            if n <= 0:
                return
            page = self._request("GET", "/api/v1/runs", query=dict(query, limit=n, cursor=cursor)) or {}
            for run in page.get("runs") or []:
                yield run
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            cursor = page.get("next")
            if not cursor:
                return

    def history(self, run_id: str, after: int = 0) -> List[Dict[str, Any]]:
        """The run's history events after sequence number after, oldest
        first, all of them (following the pages)."""
        events: List[Dict[str, Any]] = []
        while True:
            page = self.run_history(run_id, after=after or None) or {}
            got = page.get("events") or []
            events.extend(got)
            last = page.get("last") or 0
            if not got or last <= after:
                return events
            after = last

    def logs(self, run_id: str, **filters: Any) -> List[Dict[str, Any]]:
        """What the run's steps logged (filters: step, attempt, level,
        after, limit, wait); the records of one page."""
        page = self.run_logs(run_id, **filters) or {}
        return list(page.get("records") or [])

    # Interactions -----------------------------------------------------

    def signal(self, id: str, name: str, payload: Any = None, *, body: Any = None) -> Any:  # type: ignore[override]
        """Send signal name with payload to a workflow run."""
        if body is None:
            body = {} if payload is None else {"payload": payload}
        return Operations.signal(self, id, name, body=body)

    def update(self, id: str, name: str, args: Any = None, *,  # type: ignore[override]
               update_id: Optional[str] = None, wait_for: Optional[str] = None,
               timeout: Optional[Duration] = None, body: Any = None) -> Any:
        """Send update name with args to a workflow run; answers the
        update's result once it completed (None for wait_for="accepted").
        A repeated update_id answers the first update's outcome."""
        if body is None:
            body = {}
            if args is not None:
                body["args"] = args
            if update_id is not None:
                body["id"] = update_id
            if wait_for is not None:
                body["wait_for"] = wait_for
            if timeout is not None:
                body["timeout"] = format_duration(timeout)
            res = Operations.update(self, id, name, body=body) or {}
            return res.get("result") if isinstance(res, dict) else res
        return Operations.update(self, id, name, body=body)

    def query(self, id: str, name: str, args: Any = None, *, body: Any = None) -> Any:  # type: ignore[override]
        """Ask a workflow run's query name; answers its result."""
        if body is None:
            res = Operations.query(self, id, name, body={} if args is None else {"args": args}) or {}
            return res.get("result") if isinstance(res, dict) else res
        return Operations.query(self, id, name, body=body)

    def approve(self, id: str, step: str, comment: Optional[str] = None, *, body: Any = None) -> Any:  # type: ignore[override]
        """Approve the approval gate step of a run (as the token's principal)."""
        if body is None:
            body = {} if comment is None else {"comment": comment}
        return Operations.approve(self, id, step, body=body)

    def reject(self, id: str, step: str, comment: Optional[str] = None, *, body: Any = None) -> Any:  # type: ignore[override]
        """Reject the approval gate step of a run."""
        if body is None:
            body = {} if comment is None else {"comment": comment}
        return Operations.reject(self, id, step, body=body)

    def cancel(self, id: str, reason: Optional[str] = None, *, body: Any = None) -> Any:  # type: ignore[override]
        """Cancel a run: its running steps see the cancellation."""
        if body is None:
            body = {} if reason is None else {"reason": reason}
        return Operations.cancel(self, id, body=body)

    # retry(id) is the generated operation: a failed run again from its
    # failed steps.

    # Events -------------------------------------------------------------

    def send_event(self, name: str, data: Any = None, id: Optional[str] = None) -> Dict[str, Any]:
        """Store an event (name, data); a repeated id stores it once (the
        answer then has duplicate: true). Answers the stored event."""
        if not isinstance(name, str) or not name:
            raise ValueError("send_event: name must be a non-empty string")
        body: Dict[str, Any] = {"name": name}
        if data is not None:
            body["data"] = data
        if id is not None:
            body["id"] = id
        return self._request("POST", "/api/v1/events", body=body)  # type: ignore[no-any-return]

    def events(
        self,
        name: Optional[str] = None,
        *,
        field: Optional[str] = None,
        value: Any = None,
        after: Optional[datetime.datetime] = None,
        before: Optional[datetime.datetime] = None,
        page_size: int = 100,
        limit: Optional[int] = None,
    ) -> Iterator[Dict[str, Any]]:
        """Iterates over the stored events, newest first, filtered by name,
        time and a data field equal to value, a str, int, float or bool
        (sent as its JSON text)."""
        if value is not None:
            value = _json(value)  # the server takes the scalar's JSON text
        before_seq = None
        yielded = 0
        while True:
            n = page_size if limit is None else min(page_size, limit - yielded)
            if n <= 0:
                return
            page = self.list_events(name=name, field=field, value=value, after=after, before=before,
                                    before_seq=before_seq, limit=n) or {}
            for ev in page.get("events") or []:
                yield ev
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            before_seq = page.get("next")
            if not before_seq:
                return

    # Other ---------------------------------------------------------------

    def put_flow_document(self, name: str, content: str, format: str = "yaml") -> Any:
        """Store a flow document (YAML or JSON text) under name."""
        return self.put_document(body={"name": name, "format": format, "content": content})

    def create_worker_token(self, principal: str, queues: Optional[Sequence[str]] = None,
                            handlers: Optional[Sequence[str]] = None) -> str:
        """Create a service principal's worker token (admin); answers the secret."""
        body: Dict[str, Any] = {"principal": principal, "kind": "service", "role": "worker"}
        if queues:
            body["queues"] = list(queues)
        if handlers:
            body["handlers"] = list(handlers)
        return str(self.create_token(body=body)["token"])


def _json(v: Any) -> str:
    return json.dumps(v, separators=(",", ":"))
