"""The Worker's task handling without a server: what it reports for each
outcome of a handler, its logs and their bounds."""

import json
import threading
import unittest

import support  # noqa: F401  (puts the SDK on sys.path)

import hephaestus as h
from hephaestus.errors import ConnectionFailed, LeaseLost


class Fake(h.Worker):
    def __init__(self, answers=None, **kw):
        super().__init__("http://127.0.0.1:1", log=lambda line: None, **kw)
        self.posts = []
        self.answers = answers or {}

    def _post(self, path, body, timeout=75):
        self.posts.append((path, json.loads(json.dumps(body))))
        a = self.answers.get(path)
        if isinstance(a, list):
            a = a.pop(0) if a else None
        if isinstance(a, BaseException):
            raise a
        return a or {}


def run_task(w, name="a", hb="1h", **raw):
    w._slots.acquire()
    task = h.Task(w, dict({"token": "tok", "run_id": "r", "kind": "step", "name": name, "heartbeat_timeout": hb}, **raw))
    w._run_task(task)
    return task


class OutcomesTest(unittest.TestCase):
    def test_complete(self):
        w = Fake()
        w.action("a")(lambda t, args: (t.info("hi", n=1), {"got": args})[1])
        run_task(w, input={"x": 1})
        [(path, body)] = w.posts
        self.assertEqual(path, "/tasks/complete")
        self.assertEqual(body["output"], {"got": {"x": 1}})
        self.assertEqual([(r["level"], r["message"], r["attrs"]) for r in body["logs"]], [("INFO", "hi", {"n": 1})])

    def test_non_retryable(self):
        w = Fake()

        def fail(t, args):
            raise h.NonRetryable("bad input", details={"at": 3})
        w.action("a")(fail)
        run_task(w)
        [(path, body)] = w.posts
        self.assertEqual((path, body["error"], body["retryable"], body["details"]),
                         ("/tasks/fail", "bad input", False, {"at": 3}))

    def test_retryable_and_other_exceptions(self):
        w = Fake()

        def busy(t, args):
            raise h.Retryable("busy")

        def boom(t, args):
            return {}["missing"]
        w.action("busy")(busy)
        w.action("boom")(boom)
        run_task(w, name="busy")
        run_task(w, name="boom")
        self.assertEqual([(p, b["retryable"], b["error"]) for p, b in w.posts],
                         [("/tasks/fail", True, "busy"), ("/tasks/fail", True, "KeyError: 'missing'")])
        self.assertIn("Traceback", json.dumps(w.posts[1][1]["logs"]))

    def test_unknown_handler_and_output_not_json(self):
        w = Fake()
        w.action("a")(lambda t, args: object())
        run_task(w, name="nope")
        run_task(w, name="a")
        self.assertEqual([(p, b["retryable"]) for p, b in w.posts], [("/tasks/fail", False), ("/tasks/fail", False)])
        self.assertIn("no handler", w.posts[0][1]["error"])
        self.assertIn("not JSON", w.posts[1][1]["error"])

    def test_activity_table(self):
        w = Fake()
        w.activity("a")(lambda t, args: "activity")
        w.action("a")(lambda t, args: "action")
        run_task(w, name="a", kind="activity")
        self.assertEqual(w.posts[0][1]["output"], "activity")

    def test_cancelled_by_a_heartbeat(self):
        w = Fake({"/tasks/heartbeat": {"cancelled": True}})
        seen = []
        w.action("a")(lambda t, args: seen.append(t.cancelled.wait(30)) or "late")
        task = run_task(w, hb="150ms")
        self.assertEqual(seen, [True])
        self.assertTrue(task.is_cancelled())
        self.assertFalse(task.lease_lost)
        self.assertEqual([p for p, _ in w.posts], ["/tasks/heartbeat"])  # no report

    def test_lease_lost_on_heartbeat(self):
        w = Fake({"/tasks/heartbeat": LeaseLost("gone")})
        w.action("a")(lambda t, args: t.cancelled.wait(30) and "late")
        task = run_task(w, hb="150ms")
        self.assertTrue(task.lease_lost)
        self.assertEqual([p for p, _ in w.posts], ["/tasks/heartbeat"])

    def test_heartbeat_now_with_details(self):
        w = Fake()
        sent = threading.Event()

        def work(t, args):
            t.heartbeat({"done": 5})
            for _ in range(600):
                if any(p == "/tasks/heartbeat" for p, _ in w.posts):
                    break
                sent.wait(0.05)
            return "ok"
        w.action("a")(work)
        run_task(w)  # an hour's heartbeat timeout: only the asked heartbeat
        self.assertEqual(w.posts[0], ("/tasks/heartbeat", {"token": "tok", "details": {"done": 5}}))
        self.assertEqual(w.posts[1][0], "/tasks/complete")

    def test_report_retried_while_the_server_is_away(self):
        w = Fake({"/tasks/complete": [ConnectionFailed("down"), ConnectionFailed("down"), {}]})
        w.action("a")(lambda t, args: 1)
        run_task(w, hb="30s")
        self.assertEqual([p for p, _ in w.posts], ["/tasks/complete"] * 3)

    def test_lease_lost_report_is_dropped(self):
        w = Fake({"/tasks/complete": LeaseLost("stale")})
        w.action("a")(lambda t, args: 1)
        run_task(w)
        self.assertEqual([p for p, _ in w.posts], ["/tasks/complete"])


class LogsTest(unittest.TestCase):
    def test_bounds(self):
        t = h.Task(None, {"token": "t"})
        for i in range(h.MAX_BUFFERED + 5):
            t.info("m%d" % i)
        logs = t._take_logs()
        self.assertEqual(len(logs), h.MAX_PER_REQUEST)
        self.assertEqual(logs[0]["attrs"], {"dropped": 5})
        big = h.log_record("x" * 20000, "warning", {"blob": "y" * 20000})
        self.assertEqual(big["level"], "WARN")
        self.assertLessEqual(len(big["message"].encode()), h.MAX_MESSAGE)
        self.assertLessEqual(len(json.dumps(big["attrs"]).encode()), h.MAX_ATTRS)


if __name__ == "__main__":
    unittest.main()
