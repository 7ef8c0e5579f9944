"""Helpers of the SDK's tests: a real `heph server` on loopback.

The server binary is $HEPH_BIN, else one built from the repository with
`go build -o <tmp>/heph ./cmd/heph`. Nothing here asserts on time: every
wait is for an event, bounded by PATIENCE.
"""

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

TESTS = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(TESTS)
REPO = os.path.dirname(os.path.dirname(SDK))

if SDK not in sys.path:
    sys.path.insert(0, SDK)

from hephaestus import Client  # noqa: E402

# PATIENCE bounds every wait for an event (seconds).
PATIENCE = 120.0

_bin_lock = threading.Lock()
_bin = None


def heph_bin():
    """The heph binary: $HEPH_BIN, or one built into a temporary directory."""
    global _bin
    with _bin_lock:
        if _bin:
            return _bin
        env = os.environ.get("HEPH_BIN")
        if env:
            if not os.access(env, os.X_OK):
                raise RuntimeError("HEPH_BIN=%s is not an executable" % env)
            _bin = env
            return _bin
        d = tempfile.mkdtemp(prefix="heph-bin-")
        atexit.register(shutil.rmtree, d, True)
        out = os.path.join(d, "heph")
        go = shutil.which("go") or "/usr/local/go/bin/go"
        print("building heph into %s (set HEPH_BIN to skip this)" % out, file=sys.stderr, flush=True)
        subprocess.run([go, "build", "-o", out, "./cmd/heph"], cwd=REPO, check=True)
        _bin = out
        return _bin


def wait_for(what, cond, timeout=PATIENCE, every=0.05):
    """Waits until cond() answers something true and returns it."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("%s did not happen within %.0fs" % (what, timeout))
        time.sleep(every)


class Server:
    """A `heph server` process on a SQLite file in a temporary directory."""

    def __init__(self, examples=True, dir=None):
        self.dir = dir or tempfile.mkdtemp(prefix="heph-sdk-test-")
        self.db = os.path.join(self.dir, "heph.db")
        self.examples = examples
        self.proc = None
        self.url = None
        self.port = 0
        self.admin_token = None
        self._starts = 0

    def start(self):
        self._starts += 1
        log = os.path.join(self.dir, "server-%d.log" % self._starts)
        cmd = [heph_bin(), "server", "--addr", "127.0.0.1:%d" % self.port, "--sqlite", self.db,
               "--examples=%s" % ("true" if self.examples else "false"), "--log-level", "warn"]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.log = log

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError("heph server exited (%s):\n%s" % (self.proc.returncode, self.output()))
            text = self.output()
            if "listening on" not in text:
                return None
            if self.admin_token is None:
                # A first start prints the admin token after the address.
                i = text.find("HEPH_TOKEN=")
                if i < 0 or "\n" not in text[i:]:
                    return None
            return text

        try:
            text = wait_for("heph server listening", listening, timeout=60)
        except BaseException:
            self.stop(signal.SIGKILL)
            raise
        for line in text.splitlines():
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip()
            if "HEPH_TOKEN=" in line and self.admin_token is None:
                self.admin_token = line.split("HEPH_TOKEN=", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))
        if not self.admin_token:
            self.stop(signal.SIGKILL)
            raise AssertionError("heph server printed no admin token:\n%s" % text)
        return self

    def output(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self):
        # Killed, not stopped: a stopped server first answers the long
        # polls of workers still claiming.
        self.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, token=None):
        return Client(self.url, token=token or self.admin_token, timeout=60)

    def worker_token(self, prefix="py-sdk-test"):
        return self.client().create_worker_token("%s-%s" % (prefix, uuid.uuid4().hex[:8]))


_shared = None
_shared_lock = threading.Lock()


def shared_server():
    """One server with the examples for the test modules that need no
    server of their own; stopped at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Server(examples=True).start()
            atexit.register(_shared.close)
        return _shared


def uid(prefix=""):
    return prefix + uuid.uuid4().hex[:10]
