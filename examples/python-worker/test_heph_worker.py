"""Unit tests of heph_worker.py's task logs (python3 -m unittest)."""

import json
import unittest

import heph_worker as hw


def task():
    return hw.Task(None, {"token": "t", "run_id": "r", "name": "a"})


class TaskLogTest(unittest.TestCase):
    def test_records(self):
        t = task()
        t.info("hello", n=1, obj=object)
        t.warning("careful")
        t.log("odd level", level="loud")
        logs = t._take_logs()
        self.assertEqual([(r["level"], r["message"]) for r in logs],
                         [("INFO", "hello"), ("WARN", "careful"), ("INFO", "odd level")])
        self.assertEqual(logs[0]["attrs"]["n"], 1)
        self.assertIsInstance(logs[0]["attrs"]["obj"], str)  # made JSON-safe
        self.assertTrue(logs[0]["time"].endswith("Z"))
        self.assertNotIn("attrs", logs[1])
        self.assertEqual(t._take_logs(), [])

    def test_bounds(self):
        t = task()
        for i in range(hw.MAX_BUFFERED + 5):
            t.info("m%d" % i)
        logs = t._take_logs()
        self.assertEqual(len(logs), hw.MAX_PER_REQUEST)  # the note and the newest 999
        self.assertEqual(logs[0]["attrs"], {"dropped": 5})
        self.assertEqual(logs[1]["message"], "m5")
        rest = t._take_logs()
        self.assertEqual([r["message"] for r in rest], ["m%d" % (hw.MAX_BUFFERED + 4)])
        big = hw.log_record("x" * 20000, "error", {"blob": "y" * 20000})
        self.assertLessEqual(len(big["message"].encode()), hw.MAX_MESSAGE)
        self.assertLessEqual(len(json.dumps(big["attrs"]).encode()), hw.MAX_ATTRS)

    def test_put_back(self):
        t = task()
        t.info("first")
        logs = t._take_logs()
        t.info("second")
        t._put_back_logs(logs)
        self.assertEqual([r["message"] for r in t._take_logs()], ["first", "second"])


class TaskAttrsTest(unittest.TestCase):
    def test_upsert(self):
        t = task()
        t.upsert_search_attributes({"tier": "gold", "n": 1})
        t.upsert_search_attributes({"tier": "standard"})
        self.assertEqual(t._take_attrs(), {"tier": "standard", "n": 1})
        self.assertEqual(t._take_attrs(), {})

    def test_refused_attrs_fail_the_task(self):
        posts = []

        class Fake(hw.Worker):
            def _post(self, path, body, timeout=75):
                posts.append((path, dict(body)))
                if path == "/tasks/complete" and "search_attributes" in body:
                    raise hw.BadRequest('POST /tasks/complete: search attribute "tire" is not declared')
                return {}

        w = Fake("http://x", log=lambda msg: None)
        w.action("a")(lambda t, args: t.upsert_search_attributes({"tire": "gold"}) or "ok")
        w._slots.acquire()
        w._run_task(hw.Task(w, {"token": "tok", "run_id": "r", "kind": "step", "name": "a",
                                "heartbeat_timeout": "1h"}))
        self.assertEqual([p for p, _ in posts], ["/tasks/complete", "/tasks/fail"])
        self.assertEqual(posts[0][1]["search_attributes"], {"tire": "gold"})
        self.assertFalse(posts[1][1]["retryable"])
        self.assertIn('"tire" is not declared', posts[1][1]["error"])


if __name__ == "__main__":
    unittest.main()
