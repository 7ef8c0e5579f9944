"""Offline tests: the generated operations, the transport's encoding and
its problem answers raised as exceptions (against a tiny local server)."""

import datetime
import importlib.util
import json
import os
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import support  # noqa: F401  (puts the SDK on sys.path)

import hephaestus
from hephaestus import errors
from hephaestus._http import encode_query, format_duration, parse_duration

SPEC = os.path.join(support.REPO, "server", "openapi.json")
GEN = os.path.join(support.SDK, "scripts", "gen_operations.py")
OPS = os.path.join(support.SDK, "hephaestus", "_operations.py")


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_operations", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class GeneratedOperationsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gen = load_generator()
        with open(SPEC, encoding="utf-8") as f:
            cls.spec = json.load(f)

    def test_checked_in_file_is_up_to_date(self):
        with open(OPS, encoding="utf-8") as f:
            current = f.read()
        # An API change without a regeneration fails here: run
        # python3 sdk/python/scripts/gen_operations.py.
        self.assertEqual(self.gen.generate(self.spec), current,
                         "hephaestus/_operations.py is stale: run python3 sdk/python/scripts/gen_operations.py")

    def test_every_operation_is_a_client_method(self):
        ids = [op_id for op_id, _, _, _, _ in self.gen.operations(self.spec)]
        self.assertGreaterEqual(len(ids), 100)
        self.assertEqual(sorted(ids), sorted(hephaestus.Client.OPERATION_IDS))
        for op_id in ids:
            name = self.gen.snake(op_id)
            self.assertTrue(callable(getattr(hephaestus.Client, name, None)), "Client has no method %s for %s" % (name, op_id))

    def test_names(self):
        snake = self.gen.snake
        self.assertEqual(snake("startRun"), "start_run")
        self.assertEqual(snake("getRun"), "get_run")
        self.assertEqual(snake("listRuns"), "list_runs")
        self.assertEqual(snake("receiveHook"), "receive_hook")
        self.assertEqual(snake("Idempotency-Key"), "idempotency_key")
        self.assertEqual(snake("Last-Event-ID"), "last_event_id")

    def test_requests_the_operations_make(self):
        calls = []

        class Recorder(hephaestus.Client):
            def _request(self, method, path, query=None, body=None, headers=None):
                calls.append((method, path, query, body, headers))
                return {}

        c = Recorder("http://127.0.0.1:1")
        c.get_run("a b/c")
        c.list_runs(status="failed", limit=5)
        c.start_run(idempotency_key="k", body={"name": "x"})
        c.run_events("r", last_event_id="7")
        Recorder.signal(c, "r", "go", body={"payload": 1})
        self.assertEqual(calls[0][:2], ("GET", "/api/v1/runs/a%20b%2Fc"))
        self.assertEqual(calls[1][2]["status"], "failed")
        self.assertEqual(calls[1][2]["limit"], 5)
        self.assertIsNone(calls[1][2]["where"])
        self.assertEqual(calls[2][3], {"name": "x"})
        self.assertEqual(calls[2][4], {"Idempotency-Key": "k"})
        self.assertEqual(calls[3][4], {"Last-Event-ID": "7"})
        self.assertEqual(calls[4][:4], ("POST", "/api/v1/runs/r/signals/go", None, {"payload": 1}))
        for op in ("signal", "update", "query", "approve", "reject", "cancel"):
            self.assertIn("Roles:", getattr(hephaestus._operations.Operations, op).__doc__)

    def test_generator_check_mode(self):
        self.assertEqual(self.gen.main(["--check"]), 0)


class EncodingTest(unittest.TestCase):
    def test_query(self):
        q = encode_query({"a": None, "tag": ["x", "y"], "b": True, "t": datetime.datetime(2026, 1, 2, 3, 4, 5),
                          "meta.k": "v w"})
        self.assertEqual(q, "tag=x&tag=y&b=true&t=2026-01-02T03%3A04%3A05Z&meta.k=v+w")

    def test_durations(self):
        self.assertEqual(parse_duration("1m30s"), 90.0)
        self.assertEqual(parse_duration("500ms"), 0.5)
        self.assertEqual(parse_duration("1h"), 3600.0)
        self.assertEqual(parse_duration(2), 2.0)
        self.assertEqual(format_duration(20), "20s")
        self.assertEqual(format_duration(1.5), "1500ms")
        self.assertEqual(format_duration(datetime.timedelta(minutes=2)), "120s")
        for bad in ("", "abc", "10", "5x", None, [1]):
            with self.assertRaises(ValueError):
                parse_duration(bad)

    def test_bad_arguments_are_clear_errors(self):
        for addr in ("", None, "ftp://x", 7):
            with self.assertRaises(ValueError):
                hephaestus.Client(addr)
        with self.assertRaises(ValueError):
            hephaestus.Client("http://x", timeout=0)
        c = hephaestus.Client("localhost:7070")
        self.assertEqual(c.addr, "http://localhost:7070")
        with self.assertRaises(ValueError):
            c.start("")
        with self.assertRaises(ValueError):
            c.start("x", kind="nope")
        with self.assertRaises(ValueError):
            c.start("x", tags="one")
        with self.assertRaises(ValueError) as cm:
            c.start_run(body={"input": object()})
        self.assertIn("not JSON", str(cm.exception))
        w = hephaestus.Worker("http://x")
        with self.assertRaises(ValueError):
            w.action("")
        with self.assertRaises(ValueError):
            w.run()  # no handler
        w.action("a")(lambda t, a: a)
        with self.assertRaises(ValueError):
            w.action("a")(lambda t, a: a)
        with self.assertRaises(ValueError):
            hephaestus.Worker("http://x", max_tasks=0)
        with self.assertRaises(ValueError):
            hephaestus.Worker("http://x", lease="soon")


class _Problems(BaseHTTPRequestHandler):
    """Answers /status/<code>[/<type>] with that problem."""

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if parts[0] == "text":
            body = b"plain failure"
            self.send_response(502)
            self.send_header("Content-Type", "text/plain")
        elif parts[0] == "ok":
            body = json.dumps({"auth": self.headers.get("Authorization"), "path": self.path}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
        else:
            code = int(parts[1])
            ptype = "https://hephaestus.dev/problems/" + (parts[2] if len(parts) > 2 else "x")
            body = json.dumps({"type": ptype, "title": "T%d" % code, "status": code, "detail": "detail %d" % code,
                               "fix": "do this", "errors": [{"path": "f", "message": "m"}]}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ProblemsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = ThreadingHTTPServer(("127.0.0.1", 0), _Problems)
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.client = hephaestus.Client("http://127.0.0.1:%d" % cls.srv.server_address[1], token="tok")

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def test_mapping(self):
        cases = [(400, "bad-request", errors.BadRequest), (401, "unauthorized", errors.Unauthorized),
                 (403, "forbidden", errors.Forbidden), (404, "not-found", errors.NotFound),
                 (409, "conflict", errors.Conflict), (409, "lease-lost", errors.LeaseLost),
                 (413, "payload-too-large", errors.PayloadTooLarge), (422, "unprocessable", errors.Unprocessable),
                 (500, "internal", errors.ServerError), (503, "unavailable", errors.Unavailable),
                 (504, "timeout", errors.GatewayTimeout), (418, "teapot", errors.HephError)]
        for code, ptype, cls in cases:
            with self.assertRaises(cls) as cm:
                self.client._request("GET", "/status/%d/%s" % (code, ptype))
            e = cm.exception
            self.assertIs(type(e), cls)
            self.assertEqual(e.status, code)
            self.assertEqual(e.detail, "detail %d" % code)
            self.assertEqual(e.title, "T%d" % code)
            self.assertEqual(e.fix, "do this")
            self.assertEqual(e.errors, [{"path": "f", "message": "m"}])
            self.assertTrue(e.type.endswith("/" + ptype))
            self.assertIn("detail %d" % code, str(e))
        self.assertTrue(issubclass(errors.LeaseLost, errors.Conflict))

    def test_not_a_problem(self):
        with self.assertRaises(errors.ServerError) as cm:
            self.client._request("GET", "/text")
        self.assertEqual(cm.exception.status, 502)
        self.assertIn("plain failure", cm.exception.detail)

    def test_bearer_token(self):
        self.assertEqual(self.client._request("GET", "/ok")["auth"], "Bearer tok")

    def test_unreachable(self):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Problems)
        port = srv.server_address[1]
        srv.server_close()
        with self.assertRaises(errors.ConnectionFailed) as cm:
            hephaestus.Client("http://127.0.0.1:%d" % port).get("r")
        self.assertEqual(cm.exception.status, 0)


if __name__ == "__main__":
    unittest.main()
