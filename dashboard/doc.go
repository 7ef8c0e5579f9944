// Package dashboard is the web dashboard of Hephaestus: the runs with
// their DAG, timeline and history, the approvals inbox, schedules, the
// events sent to the engine with the runs their triggers started,
// queues, workers, definitions and an overview, served by `heph server`
// at / beside the API.
//
// It is server-rendered HTML (html/template) with a little JavaScript and
// SVG pictures drawn in Go; every asset is embedded, so it needs no
// network at run time. It reads nothing itself: each page is rendered
// from the answers of the API (package server), which it calls in
// process with the browser's credentials, and every action a page offers
// is one call of that API from the browser, so that the dashboard, the
// CLI and any other client never diverge. A browser signs in with an API
// token, which the API turns into a server-side session (POST
// /api/v1/sessions, 12 hours by default): the cookie (server.SessionCookie,
// HttpOnly, SameSite=Strict) holds the session's random secret, never the
// token, and signing out deletes the session. The header shows the
// caller's principal, role and groups. The API refuses every unsafe
// request a browser sends from another origin.
package dashboard
