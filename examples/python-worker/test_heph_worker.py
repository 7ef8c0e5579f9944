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


if __name__ == "__main__":
    unittest.main()
