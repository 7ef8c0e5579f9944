"""A worker of the HTTP worker protocol (docs/api.md, "The worker protocol").

    w = Worker("http://127.0.0.1:7070", token=os.environ["HEPH_TOKEN"])

    @w.action("greet")             # a document action
    def greet(task, args):
        task.info("greeting", name=args["name"])
        return {"greeting": "hello " + args["name"]}

    @w.step("example.resize")     # a Go flow's remote step handler
    def resize(task, size): ...

    @w.activity("charge")          # a workflow activity
    def charge(task, input): ...

    w.run()   # until SIGTERM/SIGINT (in the main thread) or w.stop()

The worker long-polls /tasks/claim for the handlers it has, runs each task
in a thread of its own (at most max_tasks at once) while a second thread
heartbeats the task's lease, and completes or fails the task with the
fenced token it was given. What a handler logs goes to the server with
the heartbeats and the report. A heartbeat that answers cancelled (the
run was cancelled) or lease-lost sets task.cancelled; the handler should
return soon after, and nothing more is reported for the task.
"""

import datetime
import json
import random
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._http import format_duration, parse_duration
from .client import Client
from .errors import BadRequest, ConnectionFailed, Forbidden, HephError, LeaseLost, ServerError, Unauthorized

Handler = Callable[["Task", Any], Any]

# Bounds of the records a task buffers and sends: the server takes at
# most 1000 records per request and 16 KiB of message and attributes per
# record; a task keeps its newest MAX_BUFFERED records.
MAX_PER_REQUEST = 1000
MAX_BUFFERED = 1000
MAX_MESSAGE = 8000
MAX_ATTRS = 8000
LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")


class NonRetryable(Exception):
    """Raise it from a handler to fail the task for good (no retry)."""

    def __init__(self, message: str = "", details: Any = None) -> None:
        super().__init__(message)
        self.details = details


class Retryable(Exception):
    """Raise it from a handler to fail this attempt and have the step
    retried by its retry policy (any other exception does the same, and
    logs its traceback; this one does not)."""

    def __init__(self, message: str = "", details: Any = None) -> None:
        super().__init__(message)
        self.details = details


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def log_record(message: Any, level: str = "INFO", attrs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A record as the server takes it: level one of LEVELS, the message
    and the attributes cut to their bounds, attributes JSON-safe."""
    level = str(level).upper()
    if level == "WARNING":
        level = "WARN"
    if level not in LEVELS:
        level = "INFO"
    message = str(message)
    if len(message.encode()) > MAX_MESSAGE:
        message = message.encode()[:MAX_MESSAGE - 16].decode(errors="ignore") + "...[truncated]"
    rec: Dict[str, Any] = {"time": _now(), "level": level, "message": message}
    if attrs:
        text = json.dumps(attrs, default=str)
        if len(text.encode()) > MAX_ATTRS:
            attrs = {"truncated": "the attributes were %d bytes" % len(text.encode())}
            text = json.dumps(attrs)
        rec["attrs"] = json.loads(text)
    return rec


class Task:
    """One claimed task, as the server described it.

    input is the step's input (a document action's args, a remote step's
    input, an activity's input); details the heartbeat details of an
    earlier attempt, to resume from. cancelled is set when the run was
    cancelled or this worker lost the task's lease.
    """

    def __init__(self, worker: Optional["Worker"], raw: Dict[str, Any]) -> None:
        self._worker = worker
        self.raw = raw
        self.token: str = raw["token"]
        self.run_id: str = raw.get("run_id", "")
        self.kind: str = raw.get("kind", "")
        self.name: str = raw.get("name", "")
        self.workflow: str = raw.get("workflow", "")
        self.version: int = raw.get("version", 0)
        self.step: str = raw.get("step", "")
        self.index: int = raw.get("index", 0)
        self.attempt: int = raw.get("attempt", 1)
        self.queue: str = raw.get("queue", "")
        self.input: Any = raw.get("input")
        self.details: Any = raw.get("details")
        self.deadline: str = raw.get("deadline", "")
        self.traceparent: str = raw.get("traceparent", "")
        self.cancelled = threading.Event()
        self.lease_lost = False
        self._details: Any = None
        self._has_details = False
        self._attrs: Dict[str, Any] = {}
        self._logs: List[Dict[str, Any]] = []
        self._dropped = 0
        self._lock = threading.Lock()
        self._kick = threading.Event()

    @property
    def heartbeat_timeout(self) -> float:
        """Seconds the lease lasts without a heartbeat."""
        try:
            return max(parse_duration(self.raw.get("heartbeat_timeout") or "30s"), 0.0)
        except ValueError:
            return 30.0

    def is_cancelled(self) -> bool:
        """True once the run was cancelled or the lease lost: stop soon."""
        return self.cancelled.is_set()

    # Logging: the records go to the server with the next heartbeat, or
    # with the completion or failure.

    def log(self, message: Any, level: str = "INFO", **attrs: Any) -> None:
        rec = log_record(message, level, attrs)
        with self._lock:
            self._logs.append(rec)
            if len(self._logs) > MAX_BUFFERED:
                drop = len(self._logs) - MAX_BUFFERED
                self._logs, self._dropped = self._logs[drop:], self._dropped + drop

    def debug(self, message: Any, **attrs: Any) -> None:
        self.log(message, "DEBUG", **attrs)

    def info(self, message: Any, **attrs: Any) -> None:
        self.log(message, "INFO", **attrs)

    def warning(self, message: Any, **attrs: Any) -> None:
        self.log(message, "WARN", **attrs)

    def error(self, message: Any, **attrs: Any) -> None:
        self.log(message, "ERROR", **attrs)

    def _take_logs(self) -> List[Dict[str, Any]]:
        """The records to send with the next request, oldest first (at most
        MAX_PER_REQUEST, a note of those dropped first)."""
        with self._lock:
            logs, dropped = self._logs, self._dropped
            self._logs, self._dropped = [], 0
        if dropped:
            logs.insert(0, log_record("%d earlier records were dropped by the worker (it keeps %d)" % (dropped, MAX_BUFFERED),
                                      "WARN", {"dropped": dropped}))
        if len(logs) > MAX_PER_REQUEST:
            with self._lock:
                self._logs = logs[MAX_PER_REQUEST:] + self._logs
            logs = logs[:MAX_PER_REQUEST]
        return logs

    def _put_back_logs(self, logs: List[Dict[str, Any]]) -> None:
        """Records a failed request did not deliver: sent with the next."""
        with self._lock:
            self._logs = logs + self._logs

    # Progress and heartbeats ------------------------------------------

    def heartbeat(self, details: Any = None) -> None:
        """Heartbeat now (the worker heartbeats on its own as well), with
        details, the progress a retry of the step reads back as
        task.details. It does not block: the heartbeat thread sends it."""
        if details is not None:
            self.heartbeat_details(details)
        self._kick.set()

    def heartbeat_details(self, details: Any) -> None:
        """Record progress, sent with the next heartbeat (and a failure)."""
        with self._lock:
            self._details, self._has_details = details, True

    def _take_details(self) -> Any:
        with self._lock:
            d, self._details, self._has_details = self._details, None, False
            return d

    def _put_back_details(self, d: Any) -> None:
        with self._lock:
            if not self._has_details and d is not None:
                self._details, self._has_details = d, True

    def upsert_search_attributes(self, attrs: Dict[str, Any]) -> None:
        """Upsert search attributes of the task's run (those its flow,
        document or workflow declares): sent with the completion, written
        with the result; a later call replaces a name an earlier one set.
        The server refuses a name not declared or a value of another type;
        the task then fails for good with its message."""
        with self._lock:
            self._attrs.update(attrs)

    def _take_attrs(self) -> Dict[str, Any]:
        with self._lock:
            a, self._attrs = self._attrs, {}
            return a


class Worker:
    """Runs actions, remote flow steps and workflow activities.

    addr and token: the server and a worker token. queues: the queues to
    claim from (default ["default"]). max_tasks: tasks run at once.
    wait: the claim's long poll. lease: the heartbeat timeout asked for
    each task (default: the server's, 30s). shutdown_grace: seconds run()
    waits for running tasks after a stop. log: a function taking a line
    (default: stderr).
    """

    def __init__(
        self,
        addr: str,
        token: Optional[str] = None,
        worker_id: Optional[str] = None,
        queues: Optional[Sequence[str]] = None,
        max_tasks: int = 4,
        wait: Union[str, float] = "20s",
        lease: Union[str, float, None] = None,
        log: Optional[Callable[[str], None]] = None,
        shutdown_grace: float = 30.0,
        timeout: float = 30.0,
        max_backoff: float = 10.0,
    ) -> None:
        if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or not 1 <= max_tasks <= 100:
            raise ValueError("max_tasks must be an integer from 1 to 100; got %r" % (max_tasks,))
        if isinstance(queues, str):
            queues = [queues]
        self.client = Client(addr, token=token, timeout=timeout)
        self.addr = self.client.addr
        self.token = token
        self.worker_id = worker_id or "py-%s-%s" % (socket.gethostname(), uuid.uuid4().hex[:8])
        self.queues = list(queues or ["default"])
        self.max_tasks = max_tasks
        self.wait = format_duration(wait)
        self.lease = format_duration(lease) if lease is not None else None
        self.shutdown_grace = float(shutdown_grace)
        self.max_backoff = float(max_backoff)
        self.actions: Dict[str, Handler] = {}
        self.activities: Dict[str, Handler] = {}
        self._stop = threading.Event()
        self._abandon = threading.Event()
        self._slots = threading.Semaphore(max_tasks)
        self._threads: List[threading.Thread] = []
        self._threads_lock = threading.Lock()
        self._fatal: Optional[BaseException] = None
        self.log: Callable[[str], None] = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    # Registration -----------------------------------------------------

    def _register(self, table: Dict[str, Handler], what: str, name: Any) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            n = name if isinstance(name, str) else getattr(fn, "__name__", "")
            if not n:
                raise ValueError("%s: a handler needs a name" % what)
            if not callable(fn):
                raise TypeError("%s %r: the handler must be callable (task, input)" % (what, n))
            if n in table:
                raise ValueError("%s %r is registered already" % (what, n))
            table[n] = fn
            return fn

        if callable(name) and not isinstance(name, str):
            return register(name)  # type: ignore[return-value]
        if not isinstance(name, str) or not name:
            raise ValueError("%s: the name must be a non-empty string; got %r" % (what, name))
        return register

    def action(self, name: str) -> Callable[[Handler], Handler]:
        """Register a document action: fn(task, args) -> output."""
        return self._register(self.actions, "action", name)

    def step(self, handler: str) -> Callable[[Handler], Handler]:
        """Register a Go flow's remote step handler (flow.Remote,
        flow.RemoteMap): fn(task, input) -> output. Remote steps and
        document actions are claimed alike, so it shares their table."""
        return self._register(self.actions, "step handler", handler)

    def activity(self, name: str) -> Callable[[Handler], Handler]:
        """Register a workflow activity: fn(task, input) -> output."""
        return self._register(self.activities, "activity", name)

    # HTTP ---------------------------------------------------------------

    def _post(self, path: str, body: Dict[str, Any], timeout: float = 75) -> Dict[str, Any]:
        """POST /api/v1<path>; the decoded answer ({} when empty)."""
        res = self.client._call("POST", "/api/v1" + path, body=body, timeout=timeout).body
        return res if isinstance(res, dict) else {}

    # The loop -----------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; run() then waits up to shutdown_grace for the
        running tasks and returns."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def running(self) -> int:
        """How many tasks run now."""
        with self._threads_lock:
            return sum(1 for t in self._threads if t.is_alive())

    def run(self) -> None:
        """Claim and run tasks until stop(), or SIGTERM or SIGINT when called
        in the main thread (a second signal stops waiting for the running
        tasks). Then it waits up to shutdown_grace for the running tasks
        and returns: the tasks still running are abandoned, their leases
        expire and they run again on another worker."""
        if not self.actions and not self.activities:
            raise ValueError("the worker has no handler: register one with @worker.action, .step or .activity")
        previous = {}
        if threading.current_thread() is threading.main_thread():
            def on_signal(signum: int, frame: Any) -> None:
                if self._stop.is_set():
                    self._abandon.set()
                else:
                    self.log("worker %s: signal %d: stopping (running tasks: %d)" % (self.worker_id, signum, self.running()))
                    self._stop.set()
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, on_signal)
        try:
            claimer = threading.Thread(target=self._claim_loop, name="heph-claim-" + self.worker_id, daemon=True)
            claimer.start()
            while not self._stop.wait(0.5):
                pass
            self._drain()
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
        if self._fatal is not None:
            raise self._fatal

    def _drain(self) -> None:
        deadline = time.monotonic() + self.shutdown_grace
        while not self._abandon.is_set():
            with self._threads_lock:
                alive = [t for t in self._threads if t.is_alive()]
            if not alive:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                self.log("worker %s: %d tasks still running after %.0fs: abandoned (their leases expire and they run again)"
                         % (self.worker_id, len(alive), self.shutdown_grace))
                return
            alive[0].join(min(left, 0.5))

    def _claim_loop(self) -> None:
        backoff = 0.5
        try:
            wait_s = parse_duration(self.wait)
        except ValueError:
            wait_s = 20.0
        while not self._stop.is_set():
            free = 0
            while free < self.max_tasks:
                got = self._slots.acquire(timeout=0.5) if free == 0 else self._slots.acquire(blocking=False)
                if not got:
                    break
                free += 1
            if free == 0:
                continue
            if self._stop.is_set():
                for _ in range(free):
                    self._slots.release()
                return
            body: Dict[str, Any] = {"worker_id": self.worker_id, "actions": sorted(self.actions),
                                    "activities": sorted(self.activities), "queues": self.queues,
                                    "max_tasks": free, "wait": self.wait}
            if self.lease:
                body["lease"] = self.lease
            try:
                tasks = self._post("/tasks/claim", body, timeout=wait_s + self.client.timeout).get("tasks") or []
                backoff = 0.5
            except BadRequest as e:
                # The claim itself is wrong (a bad lease, queue or wait):
                # no retry mends it.
                for _ in range(free):
                    self._slots.release()
                self.log("worker %s: the server refused the claim: %s" % (self.worker_id, e))
                self._fatal = e
                self._stop.set()
                return
            except Exception as e:  # the server is down or restarting, or a token problem
                for _ in range(free):
                    self._slots.release()
                delay = backoff * (0.5 + random.random() / 2)
                self.log("worker %s: claim failed: %s (retrying in %.1fs)" % (self.worker_id, e, delay))
                self._stop.wait(delay)
                backoff = min(backoff * 2, self.max_backoff)
                if isinstance(e, (Unauthorized, Forbidden)):
                    backoff = self.max_backoff
                continue
            for _ in range(free - len(tasks)):
                self._slots.release()
            if self._stop.is_set() and tasks:
                self.log("worker %s: stopping: %d tasks claimed during the stop are abandoned (their leases expire)"
                         % (self.worker_id, len(tasks)))
                for _ in tasks:
                    self._slots.release()
                return
            for raw in tasks:
                try:
                    task = Task(self, raw)
                except (KeyError, TypeError) as e:
                    self.log("worker %s: a claimed task does not read: %r: %s" % (self.worker_id, raw, e))
                    self._slots.release()
                    continue
                t = threading.Thread(target=self._run_task, args=(task,), daemon=True,
                                     name="heph-task-%s-%s" % (task.name, task.run_id))
                with self._threads_lock:
                    self._threads = [x for x in self._threads if x.is_alive()]
                    self._threads.append(t)
                t.start()

    def _handler(self, task: Task) -> Optional[Handler]:
        table = self.activities if task.kind == "activity" else self.actions
        return table.get(task.name)

    def _run_task(self, task: Task) -> None:
        try:
            fn = self._handler(task)
            done = threading.Event()
            hb = threading.Thread(target=self._heartbeat, args=(task, done), daemon=True)
            hb.start()
            try:
                outcome = self._execute(task, fn)
            finally:
                done.set()
                task._kick.set()
                hb.join()
            if task.cancelled.is_set():
                why = "the lease was lost" if task.lease_lost else "the run was cancelled"
                self.log("task %s of run %s: %s: nothing reported" % (task.name, task.run_id, why))
                return
            self._report(task, outcome)
        finally:
            self._slots.release()

    def _execute(self, task: Task, fn: Optional[Handler]) -> Any:
        """Runs the handler; answers (path, body) of the report."""
        try:
            if fn is None:
                raise NonRetryable("this worker has no handler for %s %r" % (task.kind, task.name))
            output = fn(task, task.input)
            try:
                json.dumps(output)
            except (TypeError, ValueError) as e:
                raise NonRetryable("the handler's output is not JSON: %s" % e) from None
            body: Dict[str, Any] = {"token": task.token, "output": output}
            attrs = task._take_attrs()
            if attrs:
                body["search_attributes"] = attrs
            return ("/tasks/complete", body)
        except NonRetryable as e:
            task.error("the task failed for good", error=str(e))
            return ("/tasks/fail", self._fail_body(task, str(e) or "NonRetryable", False, e.details))
        except Retryable as e:
            task.error("the task failed; it is retried", error=str(e))
            return ("/tasks/fail", self._fail_body(task, str(e) or "Retryable", True, e.details))
        except Exception as e:
            tb = traceback.format_exc()
            self.log("task %s of run %s failed: %s" % (task.name, task.run_id, tb))
            msg = "%s: %s" % (type(e).__name__, e)
            task.error("the task failed; it is retried", error=msg, traceback=tb)
            return ("/tasks/fail", self._fail_body(task, msg, True, None))

    @staticmethod
    def _fail_body(task: Task, error: str, retryable: bool, details: Any) -> Dict[str, Any]:
        d = details if details is not None else task._take_details()
        body: Dict[str, Any] = {"token": task.token, "error": error, "retryable": retryable}
        if d is not None:
            try:
                json.dumps(d)
                body["details"] = d
            except (TypeError, ValueError):
                pass
        return body

    def _report(self, task: Task, outcome: Any) -> None:
        path, body = outcome
        logs = task._take_logs()
        if logs:
            body["logs"] = logs
        # A report that does not reach the server is tried again while the
        # lease may still hold (the server may be restarting); after that
        # the lease expires and the task runs again elsewhere.
        give_up = time.monotonic() + min(max(task.heartbeat_timeout, 5.0), 60.0)
        delay = 0.25
        while True:
            try:
                try:
                    self._post(path, body)
                except BadRequest as e:
                    if "search_attributes" not in body:
                        raise
                    # Refused attributes write nothing and leave the claim
                    # held: the task fails for good, saying why.
                    path, body = "/tasks/fail", {"token": task.token, "error": str(e), "retryable": False}
                    self._post(path, body)
                self.log("task %s of run %s (attempt %d): %s" % (task.name, task.run_id, task.attempt,
                         "completed" if path == "/tasks/complete" else "failed: " + body["error"]))
                return
            except LeaseLost as e:
                self.log("task %s of run %s: the server refused the result: %s" % (task.name, task.run_id, e))
                return
            except (ConnectionFailed, ServerError) as e:
                if time.monotonic() + delay > give_up:
                    self.log("task %s of run %s: report failed: %s (the lease expires and the task runs again)"
                             % (task.name, task.run_id, e))
                    return
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            except Exception as e:
                self.log("task %s of run %s: report failed: %s" % (task.name, task.run_id, e))
                return

    def _heartbeat(self, task: Task, done: threading.Event) -> None:
        every = max(task.heartbeat_timeout / 3.0, 0.05)
        while True:
            task._kick.wait(every)
            task._kick.clear()
            if done.is_set():
                return
            body: Dict[str, Any] = {"token": task.token}
            d = task._take_details()
            if d is not None:
                body["details"] = d
            logs = task._take_logs()
            if logs:
                body["logs"] = logs
            try:
                if self._post("/tasks/heartbeat", body, timeout=max(every, 5.0)).get("cancelled"):
                    task.log("the run was cancelled", "WARN")
                    task.cancelled.set()
                    return
            except LeaseLost:
                task.lease_lost = True
                task.cancelled.set()
                return
            except (ValueError, TypeError) as e:  # details that are not JSON
                task._put_back_logs(logs)
                self.log("heartbeat of %s: dropped details that are not JSON: %s" % (task.name, e))
            except HephError as e:
                task._put_back_logs(logs)
                task._put_back_details(d)
                self.log("heartbeat of %s failed: %s" % (task.name, e))
            except Exception as e:
                task._put_back_logs(logs)
                self.log("heartbeat of %s failed: %s" % (task.name, e))


def _seconds(d: str) -> float:
    """Parses the Go durations the server sends ("30s", "1m30s", "500ms")."""
    return parse_duration(d)
