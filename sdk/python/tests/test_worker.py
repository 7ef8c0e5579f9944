"""The Worker against a real `heph server`: document actions, a Go flow's
remote steps, logs, failures and retries, cancellation, concurrency."""

import threading
import time
import unittest

import support
from support import PATIENCE, uid, wait_for

from hephaestus import NonRetryable, Retryable, RunCancelled, RunFailed, Worker


def setUpModule():
    global server, c
    server = support.shared_server()
    c = server.client()


class Logs:
    def __init__(self):
        self.lines = []
        self.lock = threading.Lock()

    def __call__(self, line):
        with self.lock:
            self.lines.append(line)

    def text(self):
        with self.lock:
            return "\n".join(self.lines)


class Running:
    """A Worker run in a thread, stopped at the test's end."""

    def __init__(self, test, worker):
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()
        test.addCleanup(self.stop)

    def stop(self):
        self.worker.stop()
        self.thread.join(PATIENCE)


def doc(name, steps):
    return "name: %s\nsteps:\n%s" % (name, steps)


class WorkerTest(unittest.TestCase):
    def new_worker(self, **kw):
        kw.setdefault("log", Logs())
        kw.setdefault("wait", "5s")
        return Worker(server.url, token=server.worker_token(), **kw)

    def test_document_actions(self):
        prefix = uid("py")
        name = prefix + "-quote"
        c.put_flow_document(name, doc(name, (
            "  customer:\n    action: %s.lookup\n    args: {customer: \"{{input.customer}}\"}\n    next: price\n"
            "  price:\n    action: %s.price\n"
            "    args: {amount: \"{{input.amount}}\", tier: \"{{steps.customer.output.tier}}\"}\n    done: true\n")
            % (prefix, prefix)))
        w = self.new_worker(worker_id=uid("py-doc-"))

        @w.action(prefix + ".lookup")
        def lookup(task, args):
            task.info("looked up", customer=args["customer"])
            return {"tier": "gold" if args["customer"].startswith("vip") else "standard", "by": task.step}

        @w.action(prefix + ".price")
        def price(task, args):
            task.warning("pricing", amount=args["amount"])
            return {"total": float(args["amount"]) * (0.8 if args["tier"] == "gold" else 1.0)}

        Running(self, w)
        runs = [c.start(name, {"customer": cust, "amount": 100}, kind="document") for cust in ("vip-1", "c-2")]
        outs = [c.result(r["id"], timeout=PATIENCE) for r in runs]
        self.assertEqual([o["price"]["total"] for o in outs], [80.0, 100.0])
        steps = {s["name"]: s for s in c.get(runs[0]["id"])["steps"]}
        self.assertEqual(steps["customer"]["output"], {"tier": "gold", "by": "customer"})
        logs = c.logs(runs[0]["id"])
        self.assertEqual([(r["step"], r["level"], r["message"], r["worker"]) for r in logs],
                         [("customer", "INFO", "looked up", w.worker_id), ("price", "WARN", "pricing", w.worker_id)])
        self.assertEqual(logs[0]["attrs"], {"customer": "vip-1"})
        workers = {x["id"]: x for x in c.list_workers()}
        self.assertIn(w.worker_id, workers)
        self.assertIn("action:%s.lookup" % prefix, ",".join(workers[w.worker_id]["handlers"]))

    def test_remote_steps_of_a_go_flow(self):
        # example.thumbnails: fetch (example.fetch_image) gets {"input":
        # <run input>}; resize (example.resize) is a map step over the
        # input's sizes, a task each; the run's output is the list.
        w = self.new_worker(worker_id=uid("py-thumbs-"), max_tasks=3)
        seen = []

        @w.step("example.fetch_image")
        def fetch(task, inp):
            seen.append(("fetch", task.kind, task.step, task.attempt, task.details))
            if task.attempt == 1:
                # The next attempt resumes from the details.
                raise Retryable("the image server is busy", details={"offset": 512})
            return {"url": inp["input"]["url"], "bytes": 1234}

        @w.step("example.resize")
        def resize(task, size):
            seen.append(("resize", task.kind, task.step))
            return {"size": size, "index": task.index}

        Running(self, w)
        run = c.start("example.thumbnails", {"url": "https://example.com/cat.png", "sizes": [64, 128, 256]})
        out = c.result(run["id"], timeout=PATIENCE)
        self.assertEqual(out["resize"], [{"size": 64, "index": 0}, {"size": 128, "index": 1}, {"size": 256, "index": 2}])
        self.assertEqual([x for x in seen if x[0] == "fetch"],
                         [("fetch", "step", "fetch", 1, None), ("fetch", "step", "fetch", 2, {"offset": 512})])
        self.assertEqual(sorted(x for x in seen if x[0] == "resize"), [("resize", "step", "resize")] * 3)
        steps = {s["name"]: s for s in c.get(run["id"])["steps"]}
        self.assertEqual(steps["fetch"]["output"], {"url": "https://example.com/cat.png", "bytes": 1234})

    def test_failures_and_retry(self):
        prefix = uid("py")
        name = prefix + "-flaky"
        c.put_flow_document(name, doc(name, (
            "  work:\n    action: %s.flaky\n    args: {n: \"{{input.n}}\"}\n"
            "    retry: {max_attempts: 3, initial_backoff: 100ms}\n    done: true\n") % prefix))
        calls = []
        fail_for_good = threading.Event()
        fail_for_good.set()
        w = self.new_worker(worker_id=uid("py-flaky-"))

        @w.action(prefix + ".flaky")
        def flaky(task, args):
            calls.append((task.attempt, task.details))
            if fail_for_good.is_set():
                raise NonRetryable("out of stock", details={"checked": 1})
            if len(calls) == 2:
                raise Retryable("busy, try again", details={"progress": 50})
            return {"n": args["n"], "attempt": task.attempt, "resumed_from": task.details}

        Running(self, w)
        run = c.start(name, {"n": 7}, kind="document")
        with self.assertRaises(RunFailed) as cm:
            c.result(run["id"], timeout=PATIENCE)
        self.assertIn("out of stock", cm.exception.error)
        self.assertEqual(len(calls), 1)  # NonRetryable: no second attempt
        fail_for_good.clear()
        c.retry(run["id"])
        out = c.result(run["id"], timeout=PATIENCE)
        self.assertEqual(out["work"]["n"], 7)
        self.assertEqual(out["work"]["attempt"], 3)
        # A run retry goes on counting attempts; a step retry resumes from
        # the details the attempt before failed with.
        self.assertEqual([a for a, _ in calls], [1, 2, 3])
        self.assertEqual(calls[2], (3, {"progress": 50}))
        self.assertEqual(out["work"]["resumed_from"], {"progress": 50})
        levels = [r["level"] for r in c.logs(run["id"])]
        self.assertIn("ERROR", levels)

    def test_handler_sees_cancellation(self):
        prefix = uid("py")
        name = prefix + "-block"
        c.put_flow_document(name, doc(name, "  hold:\n    action: %s.block\n    done: true\n" % prefix))
        started = threading.Event()
        saw = {}
        w = self.new_worker(worker_id=uid("py-cancel-"), lease="3s")

        @w.action(prefix + ".block")
        def block(task, args):
            started.set()
            saw["cancelled"] = task.cancelled.wait(PATIENCE)
            saw["is_cancelled"] = task.is_cancelled()
            return "too late"

        Running(self, w)
        run = c.start(name, {}, kind="document")
        self.assertTrue(started.wait(PATIENCE), "the handler did not start")
        c.cancel(run["id"], reason="sdk test")
        with self.assertRaises(RunCancelled):
            c.result(run["id"], timeout=PATIENCE)
        wait_for("the handler returned", lambda: "is_cancelled" in saw)
        self.assertTrue(saw["cancelled"])
        self.assertTrue(saw["is_cancelled"])
        self.assertEqual(c.get(run["id"])["status"], "cancelled")

    def test_max_tasks_bounds_concurrency(self):
        prefix = uid("py")
        name = prefix + "-gate"
        c.put_flow_document(name, doc(name, "  hold:\n    action: %s.gate\n    args: {i: \"{{input.i}}\"}\n    done: true\n" % prefix))
        lock = threading.Lock()
        state = {"now": 0, "max": 0}
        release = threading.Event()
        w = self.new_worker(worker_id=uid("py-max-"), max_tasks=2)

        @w.action(prefix + ".gate")
        def gate(task, args):
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            release.wait(PATIENCE)
            with lock:
                state["now"] -= 1
            return args["i"]

        Running(self, w)
        runs = [c.start(name, {"i": i}, kind="document") for i in range(4)]
        wait_for("two tasks running", lambda: state["now"] == 2)
        # Two more runs wait for a slot: none of them has started.
        self.assertEqual([c.get(r["id"])["status"] for r in runs].count("completed"), 0)
        release.set()
        for r in runs:
            c.result(r["id"], timeout=PATIENCE)
        self.assertEqual(state["max"], 2)

    def test_stop_lets_a_running_task_finish(self):
        prefix = uid("py")
        name = prefix + "-finish"
        c.put_flow_document(name, doc(name, "  hold:\n    action: %s.finish\n    done: true\n" % prefix))
        started, release = threading.Event(), threading.Event()
        w = self.new_worker(worker_id=uid("py-stop-"), shutdown_grace=PATIENCE)

        @w.action(prefix + ".finish")
        def finish(task, args):
            started.set()
            release.wait(PATIENCE)
            return "finished"

        r = Running(self, w)
        run = c.start(name, {}, kind="document")
        self.assertTrue(started.wait(PATIENCE))
        w.stop()
        time.sleep(0.2)
        self.assertTrue(r.thread.is_alive(), "run() returned while a task was running")
        release.set()
        r.thread.join(PATIENCE)
        self.assertFalse(r.thread.is_alive())
        self.assertEqual(c.result(run["id"], timeout=PATIENCE), {"hold": "finished"})


if __name__ == "__main__":
    unittest.main()
