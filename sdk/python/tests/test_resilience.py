"""Failures: a worker process killed mid-task, a server restarted while a
worker long-polls, SIGTERM's graceful stop of a worker process."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

import support
from support import PATIENCE, uid, wait_for

from hephaestus import Worker

PROC = os.path.join(support.TESTS, "worker_proc.py")


class Proc:
    def __init__(self, test, *args):
        self.out = tempfile.NamedTemporaryFile(prefix="heph-worker-", suffix=".log", delete=False)
        self.p = subprocess.Popen([sys.executable, "-B", PROC] + list(args), stdout=self.out, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1"))
        test.addCleanup(self.close)

    def output(self):
        with open(self.out.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.out.close()
        os.unlink(self.out.name)


class KilledWorkerTest(unittest.TestCase):
    def test_a_killed_workers_task_runs_again_and_completes_once(self):
        server = support.shared_server()
        c = server.client()
        prefix = uid("py")
        name = prefix + "-hold"
        c.put_flow_document(name, "name: %s\nsteps:\n  hold:\n    action: %s.hold\n"
                            "    args: {started_dir: \"{{input.started_dir}}\", until_file: \"{{input.until_file}}\"}\n"
                            "    done: true\n" % (name, prefix))
        d = tempfile.mkdtemp(prefix="heph-killed-")
        self.addCleanup(shutil.rmtree, d, True)
        started = os.path.join(d, "started")
        os.mkdir(started)
        until = os.path.join(d, "go")
        run = c.start(name, {"started_dir": started, "until_file": until}, kind="document")
        token = server.worker_token()
        first = Proc(self, server.url, token, "py-doomed-" + prefix, prefix, "2s")
        wait_for("the first worker holds the task", lambda: os.path.exists(os.path.join(started, "py-doomed-" + prefix)))
        # What it logged reaches the server with a heartbeat, before the kill.
        wait_for("the first worker's log", lambda: any(
            r["worker"] == "py-doomed-" + prefix for r in c.logs(run["id"], wait="5s")))
        first.p.send_signal(signal.SIGKILL)
        first.p.wait()
        with open(until, "w"):
            pass
        second = Proc(self, server.url, token, "py-second-" + prefix, prefix, "2s")
        out = c.result(run["id"], timeout=PATIENCE)
        self.assertEqual(out, {"hold": {"worker": "py-second-" + prefix}}, second.output())
        completed = [e for e in c.history(run["id"]) if e["kind"] == "step_completed" and e.get("step") == "hold"]
        self.assertEqual(len(completed), 1)
        workers = {r["worker"] for r in c.logs(run["id"])}
        self.assertEqual(workers, {"py-doomed-" + prefix, "py-second-" + prefix})

    def test_sigterm_stops_a_worker_process_gracefully(self):
        server = support.shared_server()
        c = server.client()
        prefix = uid("py")
        name = prefix + "-hold"
        c.put_flow_document(name, "name: %s\nsteps:\n  hold:\n    action: %s.hold\n"
                            "    args: {started_dir: \"{{input.started_dir}}\", until_file: \"{{input.until_file}}\"}\n"
                            "    done: true\n" % (name, prefix))
        d = tempfile.mkdtemp(prefix="heph-term-")
        self.addCleanup(shutil.rmtree, d, True)
        until = os.path.join(d, "go")
        run = c.start(name, {"started_dir": d, "until_file": until}, kind="document")
        wid = "py-term-" + prefix
        proc = Proc(self, server.url, server.worker_token(), wid, prefix, "30s")
        wait_for("the worker holds the task", lambda: os.path.exists(os.path.join(d, wid)))
        proc.p.send_signal(signal.SIGTERM)
        # It stops claiming but finishes the running task before it exits.
        with open(until, "w"):
            pass
        self.assertEqual(proc.p.wait(PATIENCE), 0, proc.output())
        self.assertEqual(c.result(run["id"], timeout=PATIENCE), {"hold": {"worker": wid}})
        self.assertIn("stopping", proc.output())


class ServerRestartTest(unittest.TestCase):
    def test_worker_reconnects_after_a_server_restart(self):
        server = support.Server(examples=False).start()
        self.addCleanup(server.close)
        c = server.client()
        prefix = uid("py")
        name = prefix + "-echo"
        c.put_flow_document(name, "name: %s\nsteps:\n  echo:\n    action: %s.echo\n    args: {v: \"{{input.v}}\"}\n"
                            "    done: true\n" % (name, prefix))
        lines = []
        lock = threading.Lock()

        def log(line):
            with lock:
                lines.append(line)

        w = Worker(server.url, token=server.worker_token(), worker_id=uid("py-restart-"), wait="5s",
                   log=log, max_backoff=1.0)

        @w.action(prefix + ".echo")
        def echo(task, args):
            return {"v": args["v"], "by": w.worker_id}

        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        self.addCleanup(t.join, PATIENCE)
        self.addCleanup(w.stop)
        self.assertEqual(c.result(c.start(name, {"v": "before"}, kind="document")["id"], timeout=PATIENCE),
                         {"echo": {"v": "before", "by": w.worker_id}})
        # The worker long-polls again: it is listed, and no task waits.
        wait_for("the worker is registered", lambda: any(x["id"] == w.worker_id for x in c.list_workers()))
        port = server.port
        # SIGTERM while the worker long-polls: the server answers the
        # poll and exits, and the worker's next claims are refused.
        server.stop(signal.SIGTERM)
        wait_for("the worker saw the server go", lambda: any("claim failed" in x for x in list(lines)))
        server.start()
        self.assertEqual(server.port, port)
        c = server.client()
        run = c.start(name, {"v": "after"}, kind="document")
        self.assertEqual(c.result(run["id"], timeout=PATIENCE), {"echo": {"v": "after", "by": w.worker_id}})


if __name__ == "__main__":
    unittest.main()
