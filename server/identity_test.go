package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store"
)

// Who decides a gate is the credential's principal, with its groups: an
// approver assigned by name or by group decides; a non-assignee approver
// and an admin that is not an assignee are refused with how to get a
// token that may; a body can name no groups; an approver sees only its
// gates; a resume of a gate is refused.
func TestDecisionsByIdentity(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		root := e.token("root", RoleAdmin)
		ann, bob := e.token("ann", RoleApprover), e.token("bob", RoleApprover, "reviewers")
		eve := e.token("eve", RoleApprover, "ops")
		e.api.token = root
		doc := strings.ReplaceAll(strings.Replace(approvalDoc, "{users: [insecure, admin]}", "{groups: [reviewers]}", 1), "name: approval", "name: approval-group")
		e.api.call(http.MethodPost, "/api/v1/documents", map[string]any{"name": "approval-group", "format": "yaml", "content": doc}, http.StatusCreated, nil)
		start := func(name string) string {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": name, "input": map[string]string{"title": "t"}}, http.StatusCreated, &r)
			e.waitStatus(r.ID, "waiting")
			return r.ID
		}
		byName, byGroup := start("approval-ann"), start("approval-group")

		// The approvers' inboxes hold their gates only.
		for who, want := range map[string]string{ann: byName, bob: byGroup} {
			var ps []PendingApproval
			e.api.callAs(who, http.MethodGet, "/api/v1/approvals", nil, http.StatusOK, &ps)
			if len(ps) != 1 || ps[0].RunID != want {
				t.Errorf("an approver's approvals: %+v, want the run %s", ps, want)
			}
		}
		var none []PendingApproval
		e.api.callAs(eve, http.MethodGet, "/api/v1/approvals", nil, http.StatusOK, &none)
		if len(none) != 0 {
			t.Errorf("eve's approvals: %+v, want none", none)
		}

		// Refused: a non-assignee approver, the admin, a resume of the gate.
		for who, tok := range map[string]string{"eve": eve, "root": root} {
			p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + byGroup + "/steps/review/approve", token: tok}).problem(t, http.StatusForbidden)
			if !strings.Contains(p.Detail, "heph tokens create --user <name> --groups reviewers --role approver") {
				t.Errorf("%s approves the reviewers' gate: %+v", who, p)
			}
		}
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + byName + "/steps/review/approve", token: root}).problem(t, http.StatusForbidden)
		if !strings.Contains(p.Detail, "heph tokens create --user ann --role approver") {
			t.Errorf("root approves ann's gate: %+v", p)
		}
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + byName + "/resume", body: map[string]any{"event": "approved", "step": "review", "payload": map[string]string{"actor": "ann"}}}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "decide it with Approve or Reject") || !strings.Contains(p.Detail, "/approve") {
			t.Errorf("a resume of a gate: %+v", p)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/" + byGroup + "/steps/review/approve", token: eve, body: map[string]any{"groups": []string{"reviewers"}}, invalid: true}).problem(t, http.StatusBadRequest)

		// Accepted: by name, by group; recorded as the principal.
		var d Decision
		e.api.callAs(ann, http.MethodPost, "/api/v1/runs/"+byName+"/steps/review/approve", map[string]any{"comment": "ok"}, http.StatusOK, &d)
		if d.Actor != "ann" || len(d.Groups) != 0 {
			t.Errorf("ann's decision: %+v", d)
		}
		e.api.callAs(bob, http.MethodPost, "/api/v1/runs/"+byGroup+"/steps/review/reject", nil, http.StatusOK, &d)
		if d.Actor != "bob" || !slices.Equal(d.Groups, []string{"reviewers"}) || d.Event != "rejected" {
			t.Errorf("bob's decision: %+v", d)
		}
		var al AuditList
		e.api.call(http.MethodGet, "/api/v1/audit?action=runs.reject", nil, http.StatusOK, &al)
		if len(al.Entries) != 1 || al.Entries[0].Actor != "bob" || al.Entries[0].Role != RoleApprover {
			t.Errorf("the audit entry of bob's decision: %+v", al.Entries)
		}
	})
}

// A start's creator is the credential's principal: a body naming
// created_by is refused, on_behalf_of needs the act-as permission, and
// with it the run records both, which the document's actions see.
func TestStartIdentity(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		op := e.token("ops", RoleOperator)
		portal := e.tokenWith(&TokenParams{Principal: "portal", Service: true, Role: RoleOperator, Options: store.TokenOptions{ActAs: true}})
		e.api.token = e.token("root", RoleAdmin)
		doc := "name: whofor\nsteps:\n  s:\n    action: echo\n    args: {by: \"{{run.created_by}}\", for: \"{{run.on_behalf_of}}\"}\n    done: true\n"
		e.api.call(http.MethodPost, "/api/v1/documents", map[string]any{"name": "whofor", "format": "yaml", "content": doc}, http.StatusCreated, nil)

		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: op, body: map[string]any{"kind": "document", "name": "whofor", "created_by": "ceo"}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, "on_behalf_of") {
			t.Errorf("created_by in the body: %+v", p)
		}
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: op, body: map[string]any{"kind": "document", "name": "whofor", "on_behalf_of": "ceo"}}).problem(t, http.StatusForbidden)
		if !strings.Contains(p.Detail, "act-as") {
			t.Errorf("on_behalf_of without act-as: %+v", p)
		}
		var r Run
		e.api.callAs(portal, http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "whofor", "on_behalf_of": "dana"}, http.StatusCreated, &r)
		if string(r.Metadata["created_by"]) != `"portal"` || string(r.Metadata["on_behalf_of"]) != `"dana"` {
			t.Errorf("the run's metadata: %s", r.Metadata)
		}
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" || !strings.Contains(string(done.Output), `"by":"portal"`) || !strings.Contains(string(done.Output), `"for":"dana"`) {
			t.Errorf("the action saw %s (%s)", done.Output, done.Status)
		}
		e.api.callAs(op, http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "whofor"}, http.StatusCreated, &r)
		if string(r.Metadata["created_by"]) != `"ops"` {
			t.Errorf("the operator's run: %s", r.Metadata)
		}
	})
}

// Sessions: made from a token, they expire (the fake clock), end at
// sign-out, when the token is revoked and when the principal is
// disabled; NewSession makes one without a token.
func TestSessions(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		clk := clock.NewFake(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
		e := newEnv(t, b, &Config{Clock: clk, SessionTTL: time.Hour})
		e.api.token = e.token("root", RoleAdmin)
		alice := e.token("alice", RoleApprover, "finance")
		cookie := func(s string) map[string]string { return map[string]string{"Cookie": SessionCookie + "=" + s} }
		whoami := func(s string) *resp {
			return e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: "-", header: cookie(s)})
		}

		// Expiry.
		s1 := e.signIn(alice)
		clk.Advance(time.Hour - time.Second)
		if r := whoami(s1); r.status != http.StatusOK {
			t.Fatalf("a session before its expiry: %d %s", r.status, r.body)
		}
		clk.Advance(time.Second)
		if p := whoami(s1).problem(t, http.StatusUnauthorized); !strings.Contains(p.Detail, "expired") {
			t.Errorf("an expired session: %+v", p)
		}

		// Sign-out.
		s2 := e.signIn(alice)
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/sessions/current", token: "-", header: cookie(s2)})
		whoami(s2).problem(t, http.StatusUnauthorized)
		// A bearer token has no session to end; a session makes no other.
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/sessions/current"}).problem(t, http.StatusBadRequest)
		s3 := e.signIn(alice)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/sessions", token: "-", header: cookie(s3)}).problem(t, http.StatusBadRequest)

		// Revoking the token ends its sessions.
		var ts []Token
		e.api.call(http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &ts)
		i := slices.IndexFunc(ts, func(t Token) bool { return t.Principal == "alice" })
		e.api.call(http.MethodDelete, "/api/v1/tokens/"+ts[i].ID, nil, http.StatusNoContent, nil)
		whoami(s3).problem(t, http.StatusUnauthorized)

		// A session without a token (an identity provider's sign-in), and
		// the principal's disabling ends it and refuses its token.
		secret, expires, err := e.server.NewSession(t.Context(), "carol", []string{"ops"}, RoleOperator)
		if err != nil || !expires.Equal(clk.Now().Add(time.Hour)) {
			t.Fatalf("NewSession: %v, expires %v", err, expires)
		}
		var who Caller
		whoami(secret).decode(t, &who)
		if who.Actor != "carol" || who.Role != RoleOperator || !slices.Equal(who.Groups, []string{"ops"}) || who.Via != "session" {
			t.Errorf("carol's session: %+v", who)
		}
		carol := e.token("carol", RoleRead)
		var pr Principal
		e.api.call(http.MethodPost, "/api/v1/principals/carol/disable", nil, http.StatusOK, &pr)
		if pr.DisabledAt == nil {
			t.Errorf("disabled principal %+v", pr)
		}
		whoami(secret).problem(t, http.StatusUnauthorized)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: carol}).problem(t, http.StatusUnauthorized)
		if _, _, err := e.server.NewSession(t.Context(), "carol", nil, RoleRead); err == nil {
			t.Error("NewSession of a disabled principal succeeded")
		}
		if _, _, err := e.server.NewSession(t.Context(), "dave", nil, "root"); err == nil {
			t.Error("NewSession with a bad role succeeded")
		}
	})
}

// Principals through the API: created with a token (groups kept unless
// given), listed, regrouped; a worker token's limits hold on claims.
func TestPrincipalsAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		e.api.token = e.token("root", RoleAdmin)
		var nt NewTokenJSON
		e.api.call(http.MethodPost, "/api/v1/tokens", map[string]any{"principal": "alice", "groups": []string{"finance"}, "role": "approver"}, http.StatusCreated, &nt)
		if nt.Principal != "alice" || nt.Name != "alice" || !slices.Equal(nt.Groups, []string{"finance"}) || nt.Kind != "user" {
			t.Errorf("new token %+v", nt)
		}
		e.api.call(http.MethodPost, "/api/v1/tokens", map[string]any{"principal": "alice", "name": "alice-2", "role": "read"}, http.StatusCreated, &nt)
		if !slices.Equal(nt.Groups, []string{"finance"}) {
			t.Errorf("a token without groups changed them: %+v", nt)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", body: map[string]any{"principal": "alice", "name": "a3", "kind": "service", "role": "read"}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", body: map[string]any{"principal": "x", "role": "read", "queues": []string{"q"}}}).problem(t, http.StatusBadRequest)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", body: map[string]any{"principal": "x", "role": "read", "act_as": true}}).problem(t, http.StatusBadRequest)
		var pr Principal
		e.api.call(http.MethodPut, "/api/v1/principals/alice/groups", map[string]any{"groups": []string{"ops", "finance"}}, http.StatusOK, &pr)
		if !slices.Equal(pr.Groups, []string{"finance", "ops"}) {
			t.Errorf("regrouped %+v", pr)
		}
		e.api.do(req{method: http.MethodPut, path: "/api/v1/principals/nobody/groups", body: map[string]any{"groups": []string{}}}).problem(t, http.StatusNotFound)
		var ps []Principal
		e.api.call(http.MethodGet, "/api/v1/principals", nil, http.StatusOK, &ps)
		if len(ps) != 2 || ps[0].Name != "alice" || ps[1].Name != "root" {
			t.Errorf("principals %+v", ps)
		}

		// A worker token limited to a queue and a handler.
		w := e.tokenWith(&TokenParams{Principal: "py", Service: true, Role: RoleWorker, Options: store.TokenOptions{Queues: []string{"payments"}, Handlers: []string{"upper"}}})
		claim := func(body map[string]any) *resp {
			return e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/claim", token: w, body: body})
		}
		if p := claim(map[string]any{"worker_id": "w", "actions": []string{"upper"}}).problem(t, http.StatusForbidden); !strings.Contains(p.Detail, `"default"`) {
			t.Errorf("a claim from the default queue: %+v", p)
		}
		if p := claim(map[string]any{"worker_id": "w", "actions": []string{"lower"}, "queues": []string{"payments"}}).problem(t, http.StatusForbidden); !strings.Contains(p.Detail, `"lower"`) {
			t.Errorf("a claim of another handler: %+v", p)
		}
		if r := claim(map[string]any{"worker_id": "w", "actions": []string{"upper"}, "queues": []string{"payments"}, "wait": "0s"}); r.status != http.StatusOK {
			t.Errorf("an allowed claim: %d %s", r.status, r.body)
		}
	})
}
