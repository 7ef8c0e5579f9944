"""The Client against a real `heph server` with its example definitions."""

import unittest
import uuid

import support
from support import PATIENCE, uid, wait_for

from hephaestus import BadRequest, Client, Conflict, HephError, NotFound, RunCancelled, RunFailed, Unauthorized


def setUpModule():
    global server, c
    server = support.shared_server()
    c = server.client()


def order(oid, price=100):
    return {"id": oid, "customer": "c-" + oid, "region": "eu", "items": [{"sku": "s1", "qty": 1, "price": price}]}


class StartTest(unittest.TestCase):
    def test_flow_with_business_key_and_idempotency_key(self):
        oid = uid("o-")
        key = uid("k-")
        run = c.start("example.order", order(oid), business_value=oid, idempotency_key=key, tags=["sdk-test"],
                      metadata={"tenant": "acme"})
        self.assertEqual(run["kind"], "flow")
        self.assertEqual(run["business_id"], "order::" + oid)
        out = c.result(run["id"], timeout=PATIENCE)
        self.assertIn("ship_order", out)
        # The same key answers the same run.
        again = c.start("example.order", order(oid), business_value=oid, idempotency_key=key)
        self.assertEqual(again["id"], run["id"])
        # The run by its business id.
        self.assertEqual(c.get("order::" + oid)["id"], run["id"])
        got = c.get(run["id"])
        self.assertEqual(got["status"], "completed")
        self.assertEqual(got["metadata"].get("tenant"), "acme")
        self.assertIn("sdk-test", got["tags"])

    def test_business_key_is_held(self):
        oid = uid("o-")
        first = c.start("example.order", order(oid), business_value=oid)
        c.result(first["id"], timeout=PATIENCE)
        self.assertEqual(c.get("order::" + oid)["id"], first["id"])

    def test_document(self):
        key = uid("k-")
        inp = {"employee": "ann", "amount": 50, "category": "books"}
        run = c.start("example.expense", inp, kind="document", idempotency_key=key)
        self.assertEqual(run["kind"], "document")
        again = c.start("example.expense", inp, kind="document", idempotency_key=key)
        self.assertEqual(again["id"], run["id"])
        c.cancel(run["id"], reason="sdk test")
        with self.assertRaises(RunCancelled) as cm:
            c.result(run["id"], timeout=PATIENCE)
        self.assertEqual(cm.exception.run["status"], "cancelled")

    def test_job(self):
        key = uid("k-")
        mail = uid("m-")
        run = c.start("example.email", {"to": "a@example.com", "subject": "hi"}, kind="job",
                      business_value=mail, idempotency_key=key)
        self.assertEqual(run["kind"], "job")
        c.result(run["id"], timeout=PATIENCE)
        again = c.start("example.email", {"to": "a@example.com", "subject": "hi"}, kind="job",
                        business_value=mail, idempotency_key=key)
        self.assertEqual(again["id"], run["id"])
        self.assertEqual(c.get(run["id"])["status"], "completed")

    def test_job_that_fails(self):
        run = c.start("example.email", {"to": "nobody", "subject": "hi"}, kind="job", business_value=uid("m-"))
        with self.assertRaises(RunFailed) as cm:
            c.result(run["id"], timeout=PATIENCE)
        self.assertIn("no address", str(cm.exception))

    def test_workflow_signal_update_query(self):
        wid = uid("onb-")
        key = uid("k-")
        signup = {"customer": wid, "email": wid + "@example.com", "region": "eu"}
        run = c.start("example.onboarding", signup, kind="workflow", workflow_id=wid, idempotency_key=key)
        self.assertEqual(run["kind"], "workflow")
        rid = run["id"]

        def awaiting():
            try:
                st = c.query(rid, "status")
            except HephError:
                return None
            return st if st.get("stage") == "awaiting activation" else None

        self.assertEqual(wait_for("the onboarding awaits activation", awaiting, every=0.2)["plan"], "free")
        self.assertEqual(c.update(rid, "change_plan", "team"), {"stage": "awaiting activation", "plan": "team"})
        with self.assertRaises(HephError) as cm:
            c.update(rid, "change_plan", "gold")
        self.assertIn("gold", str(cm.exception))
        self.assertEqual(c.query(rid, "status")["plan"], "team")
        c.signal(rid, "activate", {"by": "sdk"})
        out = c.result(rid, timeout=PATIENCE)
        self.assertEqual(out["plan"], "team")
        self.assertEqual(out["id"], "acct-" + wid)
        with self.assertRaises(HephError):
            c.signal(rid, "activate", {"by": "late"})
        again = c.start("example.onboarding", signup, kind="workflow", workflow_id=wid, idempotency_key=key)
        self.assertEqual(again["id"], rid)

    def test_signal_with_start(self):
        # No run of the workflow id is open: one starts and gets the signal
        # in its first activation. The same request again (the same signal
        # id) answers that run and does not deliver the signal twice.
        wid = uid("onb-")
        signup = {"customer": wid, "email": wid + "@example.com", "region": "eu"}
        sig = {"name": "activate", "payload": {"by": "sws"}, "id": uid("sig-")}
        run = c.start("example.onboarding", signup, kind="workflow", workflow_id=wid, signal=sig)
        self.assertEqual(run["kind"], "workflow")
        again = c.start("example.onboarding", signup, kind="workflow", workflow_id=wid, signal=sig)
        self.assertEqual(again["id"], run["id"])
        out = c.result(run["id"], timeout=PATIENCE)
        self.assertEqual(out["id"], "acct-" + wid)
        got = [e for e in c.history(run["id"]) if e["kind"] == "signal_received" and e.get("name") == "activate"]
        self.assertEqual(len(got), 1, got)

    def test_signal_with_start_of_a_flow_is_refused(self):
        with self.assertRaises(BadRequest) as cm:
            c.start("example.order", order(uid("o-")), business_value=uid("b-"), signal={"name": "activate"})
        self.assertIn("signal", cm.exception.detail)

    def test_idempotent_start_of_an_active_run_with_a_business_id(self):
        # A repeated start with the same Idempotency-Key answers the same
        # run while it is active and holds its workflow id (business id).
        wid = uid("onb-")
        key = uid("k-")
        signup = {"customer": wid, "email": wid + "@example.com", "region": "eu"}
        run = c.start("example.onboarding", signup, kind="workflow", workflow_id=wid, idempotency_key=key)
        try:
            again = c.start("example.onboarding", signup, kind="workflow", workflow_id=wid, idempotency_key=key)
            self.assertEqual(again["id"], run["id"])
        finally:
            c.cancel(run["id"])

    def test_bad_kind_is_an_error(self):
        with self.assertRaises(BadRequest):
            c.start_run(body={"name": "example.order", "kind": "nonsense"})


class ApprovalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tok = c.create_token(body={"principal": uid("manager-"), "groups": ["managers"], "role": "approver"})
        cls.manager = Client(server.url, token=tok["token"])

    def waiting_gate(self, rid, step):
        def at_gate():
            run = c.get(rid)
            return run["status"] == "waiting" and any(
                w.get("step") == step for w in run.get("waiting_for") or []) and run
        return wait_for("run %s waits at %s" % (rid, step), at_gate, every=0.2)

    def test_approve(self):
        run = c.start("example.expense", {"employee": "bo", "amount": 120, "category": "travel"}, kind="document")
        self.waiting_gate(run["id"], "manager_approval")
        with self.assertRaises(HephError) as cm:  # the admin is no assignee
            c.approve(run["id"], "manager_approval")
        self.assertIn(cm.exception.status, (403, 409))
        self.manager.approve(run["id"], "manager_approval", comment="fine")
        c.result(run["id"], timeout=PATIENCE)
        steps = {s["name"]: s for s in c.get(run["id"])["steps"]}
        self.assertEqual(steps["reimburse"]["status"], "completed")
        decided = [e for e in c.history(run["id"]) if e.get("step") == "manager_approval" and e["kind"] == "step_resumed"]
        self.assertEqual([(e["name"], e["data"]["comment"]) for e in decided], [("approved", "fine")])

    def test_reject(self):
        run = c.start("example.expense", {"employee": "cy", "amount": 80, "category": "food"}, kind="document")
        self.waiting_gate(run["id"], "manager_approval")
        self.manager.reject(run["id"], "manager_approval", comment="no")
        c.result(run["id"], timeout=PATIENCE)
        steps = {s["name"]: s for s in c.get(run["id"])["steps"]}
        self.assertNotEqual(steps.get("reimburse", {}).get("status"), "completed")
        self.assertEqual(steps["notify"]["status"], "completed")
        decided = [e for e in c.history(run["id"]) if e.get("step") == "manager_approval" and e["kind"] == "step_resumed"]
        self.assertEqual([(e["name"], e["data"]["comment"]) for e in decided], [("rejected", "no")])
        with self.assertRaises(BadRequest) as cm:
            self.manager.approve(run["id"], "check")  # no gate
        self.assertTrue(cm.exception.detail)


class ListAndHistoryTest(unittest.TestCase):
    def test_list_filters_and_cursors(self):
        tag = uid("t-")
        ids = []
        for _ in range(3):
            oid = uid("o-")
            ids.append(c.start("example.order", order(oid), business_value=oid, tags=[tag])["id"])
        for rid in ids:
            c.result(rid, timeout=PATIENCE)
        got = [r["id"] for r in c.list(tags=[tag], page_size=1)]
        self.assertEqual(sorted(got), sorted(ids))
        self.assertEqual(len(set(got)), 3)
        self.assertEqual(len(list(c.list(tags=[tag], page_size=1, limit=2))), 2)
        self.assertEqual(len(list(c.list(tags=[tag], status=["completed"], workflow="example.order"))), 3)
        self.assertEqual(list(c.list(tags=[tag], status="failed")), [])
        one = c.get(ids[0])
        self.assertEqual([r["id"] for r in c.list(business_id=one["business_id"])], [ids[0]])
        self.assertEqual([r["id"] for r in c.list(ids=ids[:2], tags=[tag])].__len__(), 2)
        with self.assertRaises(BadRequest) as cm:
            list(c.list(status="runing"))
        self.assertIn("runing", cm.exception.detail)

    def test_history(self):
        oid = uid("o-")
        rid = c.start("example.order", order(oid), business_value=oid)["id"]
        c.result(rid, timeout=PATIENCE)
        events = c.history(rid)
        kinds = [e["kind"] for e in events]
        self.assertIn("step_completed", kinds)
        seqs = [e["seq"] for e in events]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(len(seqs), len(set(seqs)))
        later = c.history(rid, after=seqs[1])
        self.assertEqual([e["seq"] for e in later], seqs[2:])


class FailAndRetryTest(unittest.TestCase):
    def test_failed_run_and_retry(self):
        oid = uid("o-")
        # Above the card's limit: the charge fails on every attempt.
        rid = c.start("example.order", order(oid, price=200000), business_value=oid)["id"]
        with self.assertRaises(RunFailed) as cm:
            c.result(rid, timeout=PATIENCE)
        self.assertEqual(cm.exception.run_id, rid)
        self.assertTrue(cm.exception.error)
        c.retry(rid)
        # Retried: it runs again (and fails again, the card unchanged).
        with self.assertRaises(RunFailed):
            c.result(rid, timeout=PATIENCE)
        retried = [e for e in c.history(rid) if "retr" in e["kind"]]
        self.assertTrue(retried, [e["kind"] for e in c.history(rid)])

    def test_cancel_ended_run_is_a_conflict(self):
        oid = uid("o-")
        rid = c.start("example.order", order(oid), business_value=oid)["id"]
        c.result(rid, timeout=PATIENCE)
        with self.assertRaises(Conflict):
            c.cancel(rid)
        with self.assertRaises(Conflict):
            c.retry(rid)


class EventsTest(unittest.TestCase):
    def test_send_and_list(self):
        name = uid("sdk.test.")
        eid = uid("ev-")
        sent = c.send_event(name, {"k": 1, "who": "x"}, id=eid)
        self.assertEqual(sent["id"], eid)
        self.assertFalse(sent.get("duplicate", False))
        again = c.send_event(name, {"k": 1, "who": "x"}, id=eid)
        self.assertTrue(again["duplicate"])
        c.send_event(name, {"k": 2})
        c.send_event(name, {"k": 3})
        listed = list(c.events(name))
        self.assertEqual(len(listed), 3)
        self.assertEqual([e["data"]["k"] for e in listed], [3, 2, 1])  # newest first
        self.assertEqual(len(list(c.events(name, page_size=1))), 3)
        self.assertEqual([e["id"] for e in c.events(name, field="k", value=1)], [eid])
        self.assertEqual([e["id"] for e in c.events(name, field="who", value="x")], [eid])
        self.assertEqual(list(c.events(name, field="k", value=9)), [])
        self.assertEqual(c.get_event(eid)["name"], name)


class ErrorsTest(unittest.TestCase):
    def test_not_found(self):
        with self.assertRaises(NotFound) as cm:
            c.get(str(uuid.uuid4()))
        self.assertEqual(cm.exception.status, 404)
        self.assertIn("not found", cm.exception.detail)
        with self.assertRaises(NotFound):
            c.start("example.no-such-flow", {})

    def test_bad_request_with_detail(self):
        with self.assertRaises(BadRequest) as cm:
            c.start("example.order", order("x"))  # no business value
        e = cm.exception
        self.assertEqual(e.status, 400)
        self.assertIn("business", e.detail)
        self.assertTrue(any(x.get("path") == "business_value" for x in e.errors), e.errors)

    def test_unauthorized(self):
        with self.assertRaises(Unauthorized):
            Client(server.url, token="heph_not-a-token").list_runs(limit=1)

    def test_worker_token_cannot_start(self):
        w = Client(server.url, token=server.worker_token())
        with self.assertRaises(HephError) as cm:
            w.start("example.order", order("y"), business_value=uid())
        self.assertEqual(cm.exception.status, 403)


if __name__ == "__main__":
    unittest.main()
