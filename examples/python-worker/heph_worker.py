"""The example Python worker: the actions of flow.yaml, on the Python SDK.

The worker itself (claims, heartbeats, logs, cancellation, shutdown) is
hephaestus.Worker, in sdk/python; this file registers the example actions
and parses the command line. It imports the SDK from ../../sdk/python when
it is not installed (pip install ./sdk/python).

    HEPH_TOKEN=<worker token> python3 heph_worker.py --addr http://127.0.0.1:7070
"""

import argparse
import os
import sys
import time

try:
    import hephaestus  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from hephaestus import (  # noqa: E402  (re-exported for test_heph_worker.py and older imports)
    MAX_ATTRS,
    MAX_BUFFERED,
    MAX_MESSAGE,
    MAX_PER_REQUEST,
    BadRequest,
    LeaseLost,
    NonRetryable,
    Retryable,
    Task,
    Worker,
    log_record,
)

__all__ = ["MAX_ATTRS", "MAX_BUFFERED", "MAX_MESSAGE", "MAX_PER_REQUEST", "BadRequest", "LeaseLost",
           "NonRetryable", "Retryable", "Task", "Worker", "log_record", "example_worker", "main"]


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
            if task.is_cancelled():
                return None
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
    p.add_argument("--shutdown-grace", type=float, default=30.0,
                   help="seconds to let running tasks finish after SIGTERM")
    args = p.parse_args()
    try:
        w = example_worker(args.addr, args.token, worker_id=args.worker_id, queues=args.queue,
                           max_tasks=args.max_tasks, lease=args.lease, shutdown_grace=args.shutdown_grace)
    except ValueError as e:
        p.error(str(e))
    w.log("worker %s serving actions %s on %s" % (w.worker_id, sorted(w.actions), w.addr))
    w.run()


if __name__ == "__main__":
    main()
