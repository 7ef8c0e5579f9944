"""A worker process for test_resilience.py: serves action <prefix>.hold,
which writes a file named for the worker in started_dir and then blocks
until until_file exists; its output names the worker.

    python3 worker_proc.py ADDR TOKEN WORKER_ID PREFIX LEASE
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hephaestus import Worker  # noqa: E402


def main():
    addr, token, worker_id, prefix, lease = sys.argv[1:6]
    w = Worker(addr, token=token, worker_id=worker_id, lease=lease, wait="5s")

    @w.action(prefix + ".hold")
    def hold(task, args):
        task.info("holding the task", worker=worker_id)
        with open(os.path.join(args["started_dir"], worker_id), "w") as f:
            f.write(task.token)
        while not os.path.exists(args["until_file"]):
            if task.is_cancelled():
                return None
            time.sleep(0.05)
        return {"worker": worker_id}

    w.run()


if __name__ == "__main__":
    main()
