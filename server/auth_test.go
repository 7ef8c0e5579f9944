package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store"
)

// token makes a token in the env's store for a principal (created with
// groups when it does not exist) and returns its secret.
func (e *env) token(name, role string, groups ...string) string {
	e.t.Helper()
	return e.tokenWith(&TokenParams{Principal: name, Role: role, Groups: groups})
}

// tokenWith makes a token in the env's store and returns its secret.
func (e *env) tokenWith(p *TokenParams) string {
	e.t.Helper()
	_, _, secret, err := NewToken(context.Background(), e.admin(), p, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// Missing, unknown and revoked tokens are 401; a role that does not admit
// the call is 403; every mutating call with a known caller is in the
// audit log.
func TestAuth(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, reader, worker := e.token("admin", RoleAdmin), e.token("reader", RoleRead), e.token("worker", RoleWorker)
		e.api.token = admin

		// No token needed.
		for _, p := range []string{"/healthz", "/readyz", "/api/v1/openapi.json"} {
			if r := e.api.do(req{method: http.MethodGet, path: p, token: "-"}); r.status != http.StatusOK {
				t.Errorf("GET %s without a token: %d %s", p, r.status, r.body)
			}
		}
		// Missing and unknown tokens.
		p := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", token: "-"}).problem(t, http.StatusUnauthorized)
		if !strings.Contains(p.Detail, "missing bearer token") {
			t.Errorf("missing token: %+v", p)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", token: "heph_nope"}).problem(t, http.StatusUnauthorized)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", header: map[string]string{"Authorization": "Basic eDp5"}, token: "-"}).problem(t, http.StatusUnauthorized)

		// Roles.
		for _, p := range []string{"/api/v1/runs", "/api/v1/definitions", "/api/v1/queues"} {
			if r := e.api.do(req{method: http.MethodGet, path: p, token: reader}); r.status != http.StatusOK {
				t.Errorf("GET %s as a reader: %d %s", p, r.status, r.body)
			}
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: reader, body: map[string]any{"name": "greet"}}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/tokens", token: reader}).problem(t, http.StatusForbidden)
		if r := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", token: worker}); r.status != http.StatusOK {
			t.Errorf("GET /runs as a worker: %d %s", r.status, r.body)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/definitions", token: worker}).problem(t, http.StatusForbidden)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs/x/cancel", token: worker}).problem(t, http.StatusForbidden)

		// The admin starts a run (its creator is the token's principal) and
		// approves a gate as the principal.
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approval", "input": map[string]string{"title": "t"}}, http.StatusCreated, &r)
		if string(r.Metadata["created_by"]) != `"admin"` {
			t.Errorf("created_by %s, want the token's principal", r.Metadata["created_by"])
		}
		e.waitStatus(r.ID, "waiting")
		var d Decision
		e.api.call(http.MethodPost, "/api/v1/runs/"+r.ID+"/steps/review/approve", nil, http.StatusOK, &d)
		if d.Actor != "admin" {
			t.Errorf("decision by %q, want admin", d.Actor)
		}

		// Tokens through the API: create, use, list, revoke.
		var nt NewTokenJSON
		e.api.call(http.MethodPost, "/api/v1/tokens", map[string]any{"name": "ci", "role": "read"}, http.StatusCreated, &nt)
		if !strings.HasPrefix(nt.Secret, TokenPrefix) || nt.Role != "read" || nt.Principal != "ci" || nt.Kind != "user" {
			t.Fatalf("new token %+v", nt)
		}
		if r := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", token: nt.Secret}); r.status != http.StatusOK {
			t.Errorf("GET /runs with a new token: %d %s", r.status, r.body)
		}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", body: map[string]any{"name": "ci", "role": "read"}}).problem(t, http.StatusConflict)
		e.api.do(req{method: http.MethodPost, path: "/api/v1/tokens", body: map[string]any{"name": "x", "role": "root"}, invalid: true}).problem(t, http.StatusBadRequest)
		var ts []Token
		e.api.call(http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &ts)
		if len(ts) != 4 || ts[3].Principal != "ci" {
			t.Fatalf("tokens %+v", ts)
		}
		e.api.call(http.MethodDelete, "/api/v1/tokens/"+nt.ID, nil, http.StatusNoContent, nil)
		p = e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", token: nt.Secret}).problem(t, http.StatusUnauthorized)
		if !strings.Contains(p.Detail, "revoked") {
			t.Errorf("revoked token: %+v", p)
		}
		e.api.do(req{method: http.MethodDelete, path: "/api/v1/tokens/nope"}).problem(t, http.StatusNotFound)

		// The audit log, newest first, one page at a time.
		var al AuditList
		e.api.call(http.MethodGet, "/api/v1/audit?limit=1000", nil, http.StatusOK, &al)
		var got []string
		for _, a := range al.Entries {
			got = append(got, a.Actor+" "+a.Action+" "+strconv.Itoa(a.Status))
		}
		want := []string{
			"admin tokens.revoke 404", "admin tokens.revoke 204", "admin tokens.create 400", "admin tokens.create 409", "admin tokens.create 201",
			"admin runs.approve 200", "admin runs.start 201", "worker runs.cancel 403", "reader runs.start 403",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if al.Entries[6].Target != r.ID || al.Entries[6].Method != http.MethodPost || al.Entries[6].Path != "/api/v1/runs" || al.Entries[6].Role != "admin" {
			t.Errorf("the start's entry: %+v", al.Entries[6])
		}
		var page AuditList
		e.api.call(http.MethodGet, "/api/v1/audit?limit=2", nil, http.StatusOK, &page)
		if len(page.Entries) != 2 || page.Next == "" {
			t.Fatalf("first page %+v", page)
		}
		e.api.call(http.MethodGet, "/api/v1/audit?limit=2&cursor="+page.Next, nil, http.StatusOK, &page)
		if len(page.Entries) != 2 || page.Entries[0].ID != al.Entries[2].ID {
			t.Fatalf("second page %+v", page)
		}
		e.api.call(http.MethodGet, "/api/v1/audit?action=runs.start", nil, http.StatusOK, &page)
		if len(page.Entries) != 2 {
			t.Fatalf("runs.start entries %+v", page)
		}
	})
}

// A session, made from a token (POST /sessions), authenticates through
// the cookie when there is no Authorization header, with the token's
// principal, groups and role; GET /whoami names the caller; the raw
// token is no cookie; an unsafe request a browser sends from another
// origin is refused, whatever its credentials, and one from the same
// origin passes.
func TestSessionCookie(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin, reader := e.token("admin", RoleAdmin), e.token("reader", RoleRead, "ops")
		cookie := func(secret string) map[string]string {
			return map[string]string{"Cookie": SessionCookie + "=" + secret}
		}
		adminSession, readerSession := e.signIn(admin), e.signIn(reader)

		var who Caller
		if r := e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: "-", header: cookie(readerSession)}); r.status != http.StatusOK {
			t.Fatalf("whoami with the reader's cookie: %d %s", r.status, r.body)
		} else {
			r.decode(t, &who)
		}
		if who.Actor != "reader" || who.Role != RoleRead || who.Via != "session" || !slices.Equal(who.Groups, []string{"ops"}) {
			t.Errorf("whoami: %+v", who)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: "-", header: cookie("hephs_nope")}).problem(t, http.StatusUnauthorized)
		// A token is no session.
		e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: "-", header: cookie(reader)}).problem(t, http.StatusUnauthorized)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: "-"}).problem(t, http.StatusUnauthorized)
		// A bearer token wins over the cookie.
		e.api.do(req{method: http.MethodGet, path: "/api/v1/whoami", token: "heph_nope", header: cookie(adminSession)}).problem(t, http.StatusUnauthorized)
		// The reader's session may not start a run.
		start := map[string]any{"kind": "document", "name": "approval", "input": map[string]string{"title": "t"}}
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: "-", header: cookie(readerSession), body: start}).problem(t, http.StatusForbidden)

		// Same origin (as the dashboard's fetch sends it): accepted.
		same := cookie(adminSession)
		same["Sec-Fetch-Site"] = "same-origin"
		if r := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: "-", header: same, body: start}); r.status != http.StatusCreated {
			t.Fatalf("same-origin start with the admin's cookie: %d %s", r.status, r.body)
		}
		// Another site's form or fetch: refused, with the cookie or a token.
		for _, h := range []map[string]string{
			{"Cookie": SessionCookie + "=" + adminSession, "Sec-Fetch-Site": "cross-site"},
			{"Cookie": SessionCookie + "=" + adminSession, "Origin": "https://evil.example"},
			{"Authorization": "Bearer " + admin, "Sec-Fetch-Site": "same-site"},
		} {
			p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: "-", header: h, body: start}).problem(t, http.StatusForbidden)
			if !strings.Contains(p.Detail, "cross-origin") {
				t.Errorf("%v: %+v", h, p)
			}
		}
		// Reads from anywhere are answered (they change nothing).
		if r := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs", token: "-", header: map[string]string{"Cookie": SessionCookie + "=" + adminSession, "Sec-Fetch-Site": "cross-site"}}); r.status != http.StatusOK {
			t.Errorf("cross-site GET: %d %s", r.status, r.body)
		}
		var list RunList
		e.api.token = admin
		e.api.call(http.MethodGet, "/api/v1/runs", nil, http.StatusOK, &list)
		if len(list.Runs) != 1 {
			t.Errorf("runs: %d, want the one same-origin start", len(list.Runs))
		}
	})
}

// signIn makes a session of a token and returns its secret.
func (e *env) signIn(token string) string {
	e.t.Helper()
	var s Session
	e.api.callAs(token, http.MethodPost, "/api/v1/sessions", nil, http.StatusCreated, &s)
	if !strings.HasPrefix(s.Secret, SessionPrefix) {
		e.t.Fatalf("session %+v", s)
	}
	return s.Secret
}

// touchCount counts the token uses a server records.
type touchCount struct {
	store.Admin
	n atomic.Int32
}

func (a *touchCount) TouchToken(ctx context.Context, id string, at time.Time) error {
	a.n.Add(1)
	return a.Admin.TouchToken(ctx, id, at)
}

// A token's use is recorded at its first request and again once
// store.TouchInterval has passed since the recorded one; the requests
// between do not ask the store to record it (a round trip each).
func TestTokenUseRecordedOncePerInterval(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		clk := clock.NewFake(time.Now().UTC().Truncate(time.Second))
		admin := &touchCount{Admin: e.admin()}
		s := serve(t, e.store, e.client, &Config{Clock: clk, Admin: admin})
		tok := e.token("toucher", RoleAdmin)
		lastUsed := func() time.Time {
			t.Helper()
			var ts []Token
			s.api.callAs(tok, http.MethodGet, "/api/v1/tokens", nil, http.StatusOK, &ts)
			i := slices.IndexFunc(ts, func(t Token) bool { return t.Principal == "toucher" })
			if i < 0 || ts[i].LastUsedAt == nil {
				t.Fatalf("the token's last use is not recorded: %+v", ts)
			}
			return *ts[i].LastUsedAt
		}
		first := clk.Now()
		if at := lastUsed(); !at.Equal(first) || admin.n.Load() != 1 {
			t.Fatalf("after the first request: last used %v (want %v), %d touches (want 1)", at, first, admin.n.Load())
		}
		clk.Advance(store.TouchInterval - time.Second)
		for range 3 {
			lastUsed()
		}
		if n := admin.n.Load(); n != 1 {
			t.Fatalf("requests within the interval asked the store to record the use %d times in all, want 1", n)
		}
		clk.Advance(2 * time.Second)
		if at := lastUsed(); !at.Equal(clk.Now()) || admin.n.Load() != 2 {
			t.Fatalf("after the interval: last used %v (want %v), %d touches (want 2)", at, clk.Now(), admin.n.Load())
		}
	})
}
