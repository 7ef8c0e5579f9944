"""A Hephaestus worker in Python, using only the standard library.

It speaks the HTTP worker protocol of `heph server` (docs/api.md, "Workers
in any language"): it long-polls /api/v1/tasks/claim for the actions and
activities it handles, runs each task in a thread while a second thread
heartbeats its lease, and completes or fails the task with the token it
was given. What a handler logs (task.info, task.warning, task.error,
task.log) goes to the server with the heartbeats and the completion or
failure, and is read with `heph logs <run>`, the API's
/runs/{id}/logs and the dashboard's run page. The token is fenced: if this worker stalls past its lease and
another worker takes the task over, the server refuses this worker's late
answer (409 lease-lost) and nothing is applied twice.

Use it as a library:

    w = Worker("http://127.0.0.1:7070", token=os.environ.get("HEPH_TOKEN"))

    @w.action("greet")
    def greet(task, args):
        task.info("greeting", name=args["name"])
        return {"greeting": "hello " + args["name"]}

    w.run()

or run this file to serve the example actions of flow.yaml.
"""

import argparse
import datetime
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid


class NonRetryable(Exception):
    """Raise it from a handler to fail the step without a retry."""


class LeaseLost(Exception):
    """The server no longer accepts this worker's answer for a task."""


class BadRequest(Exception):
    """The server refused a request as bad input (400), saying why."""


# Bounds of the records a task buffers and sends: the server takes at
# most 1000 records per request and 16 KiB of message and attributes per
# record; a task keeps its newest MAX_BUFFERED records.
MAX_PER_REQUEST = 1000
MAX_BUFFERED = 1000
MAX_MESSAGE = 8000
MAX_ATTRS = 8000
LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def log_record(message, level="INFO", attrs=None):
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
    rec = {"time": _now(), "level": level, "message": message}
    if attrs:
        text = json.dumps(attrs, default=str)
        if len(text.encode()) > MAX_ATTRS:
            attrs = {"truncated": "the attributes were %d bytes" % len(text.encode())}
            text = json.dumps(attrs)
        rec["attrs"] = json.loads(text)
    return rec


class Task:
    """One claimed task, as the server described it."""

    def __init__(self, worker, raw):
        self._worker = worker
        self.raw = raw
        self.token = raw["token"]
        self.run_id = raw.get("run_id", "")
        self.kind = raw.get("kind", "")
        self.name = raw.get("name", "")
        self.step = raw.get("step", "")
        self.attempt = raw.get("attempt", 1)
        self.input = raw.get("input")
        self.details = raw.get("details")
        self.cancelled = threading.Event()
        self._details = None
        self._attrs = {}
        self._logs = []
        self._dropped = 0
        self._lock = threading.Lock()

    # Logging: the records go to the server with the next heartbeat, or
    # with the completion or failure.

    def log(self, message, level="INFO", **attrs):
        rec = log_record(message, level, attrs)
        with self._lock:
            self._logs.append(rec)
            if len(self._logs) > MAX_BUFFERED:
                drop = len(self._logs) - MAX_BUFFERED
                self._logs, self._dropped = self._logs[drop:], self._dropped + drop

    def debug(self, message, **attrs):
        self.log(message, "DEBUG", **attrs)

    def info(self, message, **attrs):
        self.log(message, "INFO", **attrs)

    def warning(self, message, **attrs):
        self.log(message, "WARN", **attrs)

    def error(self, message, **attrs):
        self.log(message, "ERROR", **attrs)

    def _take_logs(self):
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

    def _put_back_logs(self, logs):
        """Records a failed request did not deliver: sent with the next."""
        with self._lock:
            self._logs = logs + self._logs

    def heartbeat_details(self, details):
        """Record progress: sent with the next heartbeat; a retry of the
        step reads it back as task.details."""
        with self._lock:
            self._details = details

    def upsert_search_attributes(self, attrs):
        """Upsert search attributes of the task's run (those its flow,
        document or workflow declares): sent with the completion, written
        with the result; a later call replaces a name an earlier one set.
        The server refuses a name not declared or a value of another type;
        the task then fails for good with its message."""
        with self._lock:
            self._attrs.update(attrs)

    def _take_attrs(self):
        with self._lock:
            a, self._attrs = self._attrs, {}
            return a

    def _take_details(self):
        with self._lock:
            d, self._details = self._details, None
            return d


class Worker:
    def __init__(self, addr, token=None, worker_id=None, queues=None,
                 max_tasks=4, wait="20s", lease=None, log=None):
        self.addr = addr.rstrip("/")
        self.token = token
        self.worker_id = worker_id or "py-%s-%s" % (socket.gethostname(), uuid.uuid4().hex[:8])
        self.queues = queues or ["default"]
        self.max_tasks = max_tasks
        self.wait = wait
        self.lease = lease
        self.actions = {}
        self.activities = {}
        self._stop = threading.Event()
        self._slots = threading.Semaphore(max_tasks)
        self._threads = []
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    # Registration -----------------------------------------------------

    def action(self, name):
        """Register a document action or remote flow step: fn(task, args)."""
        def register(fn):
            self.actions[name] = fn
            return fn
        return register

    def activity(self, name):
        """Register a workflow activity: fn(task, input)."""
        def register(fn):
            self.activities[name] = fn
            return fn
        return register

    # HTTP ---------------------------------------------------------------

    def _post(self, path, body, timeout=75):
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.addr + "/api/v1" + path, data=data, method="POST")
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                return json.loads(raw) if raw else {}
        except urllib.error.HTTPError as e:
            problem = {}
            try:
                problem = json.loads(e.read())
            except Exception:
                pass
            if e.code == 409 and problem.get("type", "").endswith("/lease-lost"):
                raise LeaseLost(problem.get("detail", "lease lost"))
            if e.code == 400:
                raise BadRequest("%s %s: %s" % ("POST", path, problem.get("detail", e.reason)))
            raise RuntimeError("%s %s: %d %s: %s" % ("POST", path, e.code,
                               problem.get("title", e.reason), problem.get("detail", "")))

    # The loop -----------------------------------------------------------

    def stop(self):
        """Stop claiming; tasks already running finish and report."""
        self._stop.set()

    def run(self):
        """Claim and run tasks until stop() (or SIGTERM/SIGINT when run as
        a program); then wait for the running tasks."""
        backoff = 0.5
        while not self._stop.is_set():
            free = 0
            while free < self.max_tasks:
                got = self._slots.acquire(timeout=1) if free == 0 else self._slots.acquire(blocking=False)
                if not got:
                    break
                free += 1
            if free == 0:
                continue
            body = {"worker_id": self.worker_id, "actions": sorted(self.actions),
                    "activities": sorted(self.activities), "queues": self.queues,
                    "max_tasks": free, "wait": self.wait}
            if self.lease:
                body["lease"] = self.lease
            try:
                tasks = self._post("/tasks/claim", body).get("tasks") or []
                backoff = 0.5
            except Exception as e:  # the server is down or restarting
                for _ in range(free):
                    self._slots.release()
                self.log("claim failed: %s (retrying in %.1fs)" % (e, backoff))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10)
                continue
            for _ in range(free - len(tasks)):
                self._slots.release()
            for raw in tasks:
                t = threading.Thread(target=self._run_task, args=(Task(self, raw),), daemon=True)
                self._threads.append(t)
                t.start()
            self._threads = [t for t in self._threads if t.is_alive()]
        for t in self._threads:
            t.join()

    def _run_task(self, task):
        try:
            handlers = self.activities if task.kind == "activity" else self.actions
            fn = handlers.get(task.name)
            done = threading.Event()
            hb = threading.Thread(target=self._heartbeat, args=(task, done), daemon=True)
            hb.start()
            try:
                if fn is None:
                    raise NonRetryable("this worker has no handler for %s %r" % (task.kind, task.name))
                output = fn(task, task.input)
                outcome = ("/tasks/complete", {"token": task.token, "output": output})
                attrs = task._take_attrs()
                if attrs:
                    outcome[1]["search_attributes"] = attrs
            except NonRetryable as e:
                task.error("the task failed for good", error=str(e))
                outcome = ("/tasks/fail", {"token": task.token, "error": str(e), "retryable": False,
                                           "details": task._take_details()})
            except Exception as e:
                self.log("task %s of run %s failed: %s" % (task.name, task.run_id, traceback.format_exc()))
                task.error("the task failed; it is retried", error="%s: %s" % (type(e).__name__, e),
                           traceback=traceback.format_exc())
                outcome = ("/tasks/fail", {"token": task.token, "error": "%s: %s" % (type(e).__name__, e),
                                           "retryable": True, "details": task._take_details()})
            finally:
                done.set()
                hb.join()
            if task.cancelled.is_set():
                return  # the run was cancelled: nothing to report
            logs = task._take_logs()
            if logs:
                outcome[1]["logs"] = logs
            try:
                try:
                    self._post(outcome[0], outcome[1])
                except BadRequest as e:
                    if "search_attributes" not in outcome[1]:
                        raise
                    # Refused attributes write nothing and leave the claim
                    # held: the task fails for good, saying why.
                    outcome = ("/tasks/fail", {"token": task.token, "error": str(e), "retryable": False})
                    self._post(outcome[0], outcome[1])
                self.log("task %s of run %s (attempt %d): %s" % (task.name, task.run_id, task.attempt,
                         "completed" if outcome[0] == "/tasks/complete" else "failed: " + outcome[1]["error"]))
            except LeaseLost as e:
                self.log("task %s of run %s: the server refused the result: %s" % (task.name, task.run_id, e))
            except Exception as e:
                # The answer is lost or the server is down: the lease
                # expires and the task runs again elsewhere.
                self.log("task %s of run %s: report failed: %s" % (task.name, task.run_id, e))
        finally:
            self._slots.release()

    def _heartbeat(self, task, done):
        every = _seconds(task.raw.get("heartbeat_timeout", "30s")) / 3.0
        while not done.wait(max(every, 0.05)):
            body = {"token": task.token}
            d = task._take_details()
            if d is not None:
                body["details"] = d
            logs = task._take_logs()
            if logs:
                body["logs"] = logs
            try:
                if self._post("/tasks/heartbeat", body, timeout=max(every, 1)).get("cancelled"):
                    task.cancelled.set()
                    return
            except LeaseLost:
                task.cancelled.set()
                return
            except Exception as e:
                task._put_back_logs(logs)
                self.log("heartbeat of %s failed: %s" % (task.name, e))


def _seconds(d):
    """Parses the Go durations the server sends ("30s", "1m30s", "500ms")."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    total, num, i = 0.0, "", 0
    while i < len(d):
        c = d[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        for u in ("ms", "us", "µs", "ns", "h", "m", "s"):
            if d.startswith(u, i):
                total += float(num or 0) * units[u]
                num, i = "", i + len(u)
                break
        else:
            raise ValueError("bad duration %r" % d)
    return total


# The example actions of flow.yaml ---------------------------------------

def example_worker(addr, token, **kw):
    w = Worker(addr, token=token, **kw)

    @w.action("lookup_customer")
    def lookup_customer(task, args):
        cid = args["customer"]
        tier = "gold" if cid.startswith("vip") else "standard"
        task.info("looked up the customer", customer=cid, tier=tier)
        task.upsert_search_attributes({"tier": tier})
        return {"id": cid, "tier": tier}

    @w.action("quote")
    def quote(task, args):
        price = float(args["amount"])
        discount = 0.2 if args.get("tier") == "gold" else 0.0
        task.info("priced the order", amount=price, discount=discount)
        return {"total": round(price * (1 - discount), 2), "discount": discount}

    @w.action("slow")
    def slow(task, args):
        # For tests: say "I hold the task" with a file named for this
        # worker in started_dir, then block until until_file exists, so a
        # test can kill this worker while it holds the task.
        task.info("holding the task", worker=w.worker_id)
        started = args.get("started_dir")
        if started:
            with open(os.path.join(started, w.worker_id), "w") as f:
                f.write(task.token)
        marker = args.get("until_file")
        while marker and not os.path.exists(marker):
            time.sleep(0.05)
        return {"worker": w.worker_id}

    return w


def main():
    p = argparse.ArgumentParser(description="a Hephaestus worker in Python")
    p.add_argument("--addr", default=os.environ.get("HEPH_ADDR", "http://127.0.0.1:7070"))
    p.add_argument("--token", default=os.environ.get("HEPH_TOKEN"))
    p.add_argument("--worker-id", default=None)
    p.add_argument("--queue", action="append", default=None)
    p.add_argument("--max-tasks", type=int, default=4)
    p.add_argument("--lease", default=None, help='lease per task, e.g. "30s"')
    args = p.parse_args()
    w = example_worker(args.addr, args.token, worker_id=args.worker_id, queues=args.queue,
                       max_tasks=args.max_tasks, lease=args.lease)
    signal.signal(signal.SIGTERM, lambda *_: w.stop())
    signal.signal(signal.SIGINT, lambda *_: w.stop())
    w.log("worker %s serving actions %s on %s" % (w.worker_id, sorted(w.actions), args.addr))
    w.run()


if __name__ == "__main__":
    main()
