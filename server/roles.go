package server

import (
	"fmt"
	"slices"
	"strings"
)

// role is what a token or session may do.
type role string

// The roles.
const (
	roleAdmin    role = "admin"    // everything
	roleOperator role = "operator" // every read, and runs, schedules, queues changes
	roleApprover role = "approver" // decide its gates; read them and their runs
	roleWorker   role = "worker"   // the worker protocol and reading runs
	roleRead     role = "read"     // every read
)

// The roles of API tokens and sessions.
const (
	RoleAdmin    = string(roleAdmin)
	RoleOperator = string(roleOperator)
	RoleApprover = string(roleApprover)
	RoleWorker   = string(roleWorker)
	RoleRead     = string(roleRead)
)

// Roles lists the roles, from the widest.
var Roles = []string{RoleAdmin, RoleOperator, RoleApprover, RoleWorker, RoleRead}

// validRole reports whether r names a role.
func validRole(r string) bool { return slices.Contains(Roles, r) }

// access is the set of roles a route admits: admin always, and public
// routes anyone, even without a credential. The register table (routes.go)
// gives each route one; it is the single source of the role matrix
// (RoleMatrix, docs/security.md).
type access uint8

const (
	bitOperator access = 1 << iota
	bitApprover
	bitWorker
	bitRead
	bitPublic
	// bitOwn limits an approver to the runs and approvals of the gates it
	// may decide (checked by the server, not by the route's access).
	bitOwn
)

// The route's access sets.
const (
	accessPublic access = bitPublic
	// accessAdmin: admin only.
	accessAdmin access = 0
	// accessRead: every read (read, operator).
	accessRead = bitRead | bitOperator
	// accessRunList: listing runs (read, operator, worker).
	accessRunList = accessRead | bitWorker
	// accessRun: reading one run (read, operator, worker; an approver
	// only the runs with a gate it may decide, checked by the handler).
	accessRun = accessRunList | bitApprover | bitOwn
	// accessApprovals: the pending approvals (an approver sees those it
	// may decide).
	accessApprovals = accessRead | bitApprover | bitOwn
	// accessDecide: deciding gates (approver, admin; both only as
	// assignees).
	accessDecide = bitApprover
	// accessOperate: changing runs, schedules and queues (operator).
	accessOperate = bitOperator
	// accessWorker: the worker protocol.
	accessWorker = bitWorker
	// accessAnyone: any credential (whoami, sessions).
	accessAnyone = bitRead | bitOperator | bitApprover | bitWorker
)

func (a access) admits(r role) bool {
	switch r {
	case roleAdmin:
		return true
	case roleOperator:
		return a&(bitOperator|bitPublic) != 0
	case roleApprover:
		return a&(bitApprover|bitPublic) != 0
	case roleWorker:
		return a&(bitWorker|bitPublic) != 0
	case roleRead:
		return a&(bitRead|bitPublic) != 0
	}
	return a&bitPublic != 0
}

// RoleMatrix renders the role matrix of the routes as a Markdown table:
// one row per route, one column per role, "yes" where the role may call
// it ("own" for an approver's runs and approvals, which are limited to
// the gates it may decide), "public" for routes without a credential.
// docs/security.md holds it (a test checks that it is current).
func (s *Server) RoleMatrix() string {
	var b strings.Builder
	b.WriteString("| route | " + strings.Join(Roles, " | ") + " |\n")
	b.WriteString("|---" + strings.Repeat("|:-:", len(Roles)) + "|\n")
	for _, rt := range s.routes {
		fmt.Fprintf(&b, "| `%s %s` |", rt.method, rt.path)
		for _, r := range Roles {
			cell := "–"
			switch {
			case rt.access == accessPublic:
				cell = "public"
			case rt.access.admits(role(r)) && role(r) == roleApprover && rt.access&bitOwn != 0:
				cell = "own"
			case rt.access.admits(role(r)):
				cell = "yes"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}
