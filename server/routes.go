package server

import (
	_ "embed"
	"net/http"
)

// Prefix is the path of the API's routes.
const Prefix = "/api/v1"

//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of the API.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// register lists every route: one table, which the OpenAPI document
// matches route for route (a test checks it both ways), and whose access
// sets are the role matrix (roles.go; docs/security.md is checked
// against RoleMatrix).
func (s *Server) register() {
	const p = Prefix
	get, post, put, del := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete

	s.handle(get, "/healthz", accessPublic, "", s.healthz)
	s.handle(get, "/readyz", accessPublic, "", s.readyz)
	s.handle(get, p+"/openapi.json", accessPublic, "", serveOpenAPI)
	s.handle(post, HookPrefix+"/{name}", accessPublic, "", s.receiveHook)

	s.handle(get, p+"/whoami", accessAnyone, "", s.whoami)

	// Runs.
	s.handle(post, p+"/runs", accessOperate, "runs.start", s.startRun)
	s.handle(get, p+"/runs", accessRunList, "", s.listRuns)
	s.handleStream(get, p+"/runs/events", accessRunList, s.runsEvents)
	s.handle(get, p+"/runs/{id}", accessRun, "", s.getRun)
	s.handle(del, p+"/runs/{id}", accessOperate, "runs.delete", s.deleteRun)
	s.handleStream(get, p+"/runs/{id}/events", accessRun, s.runEvents)
	s.handle(get, p+"/runs/{id}/history", accessRun, "", s.history)
	s.handle(get, p+"/runs/{id}/history/export", accessRun, "", s.exportHistory)
	s.handle(get, p+"/runs/{id}/logs", accessRun, "", s.logs)
	s.handle(get, p+"/runs/{id}/steps", accessRun, "", s.steps)
	s.handle(get, p+"/runs/{id}/event-waits", accessRun, "", s.runEventWaits)
	s.handle(get, p+"/runs/{id}/result", accessRun, "", s.result)
	s.handle(get, p+"/runs/{id}/state", accessRun, "", s.state)

	s.registerInteractions()

	// Definitions and documents.
	s.handle(get, p+"/definitions", accessRead, "", s.definitions)
	s.handle(get, p+"/definitions/{name}", accessRead, "", s.definition)
	s.handle(get, p+"/definitions/{name}/graph", accessRead, "", s.graph)
	s.handle(get, p+"/definitions/{name}/versions", accessRead, "", s.listVersions)
	s.handle(get, p+"/definitions/{name}/version-rule", accessRead, "", s.getVersionRule)
	s.handle(put, p+"/definitions/{name}/version-rule", accessOperate, "versions.rule.set", s.putVersionRule)
	s.handle(del, p+"/definitions/{name}/version-rule", accessOperate, "versions.rule.clear", s.deleteVersionRule)
	s.handle(post, p+"/definitions/{name}/versions/{version}/retire", accessOperate, "versions.retire", s.setVersionState("retire"))
	s.handle(post, p+"/definitions/{name}/versions/{version}/unretire", accessOperate, "versions.unretire", s.setVersionState("unretire"))
	s.handle(del, p+"/definitions/{name}/versions/{version}", accessOperate, "versions.delete", s.setVersionState("delete"))
	s.handle(post, p+"/documents", accessAdmin, "documents.put", s.putDocument)
	s.handle(get, p+"/documents", accessRead, "", s.listDocuments)
	s.handle(post, p+"/documents/validate", accessRead, "documents.validate", s.validateDocument)
	s.handle(get, p+"/documents/{name}", accessRead, "", s.getDocument)

	// Schedules.
	// Events.
	s.handle(post, p+"/events", accessOperate|accessWorker, "events.send", s.sendEvent)
	s.handle(get, p+"/events", accessRead, "", s.listEvents)
	s.handle(get, p+"/events/{id}", accessRead, "", s.getEvent)
	s.handle(get, p+"/triggers", accessRead, "", s.listTriggers)
	s.handle(get, p+"/triggers/{name}", accessRead, "", s.getTrigger)
	s.handle(get, p+"/triggers/{name}/groups", accessRead, "", s.listTriggerGroups)
	s.handle(put, p+"/triggers/{name}", accessOperate, "triggers.put", s.putTrigger)
	s.handle(del, p+"/triggers/{name}", accessOperate, "triggers.delete", s.deleteTrigger)

	s.handle(get, p+"/schedules", accessRead, "", s.listSchedules)
	s.handle(post, p+"/schedules", accessOperate, "schedules.create", s.createSchedule)
	s.handle(get, p+"/schedules/{id}", accessRead, "", s.getSchedule)
	s.handle(put, p+"/schedules/{id}", accessOperate, "schedules.update", s.updateSchedule)
	s.handle(del, p+"/schedules/{id}", accessOperate, "schedules.delete", s.deleteSchedule)
	s.handle(post, p+"/schedules/{id}/pause", accessOperate, "schedules.pause", s.pauseSchedule(true))
	s.handle(post, p+"/schedules/{id}/resume", accessOperate, "schedules.resume", s.pauseSchedule(false))
	s.handle(post, p+"/schedules/{id}/trigger", accessOperate, "schedules.trigger", s.triggerSchedule)
	s.handle(post, p+"/schedules/{id}/backfill", accessOperate, "schedules.backfill", s.backfill)
	s.handle(get, p+"/schedules/{id}/next", accessRead, "", s.nextFires)
	s.handle(get, p+"/schedules/{id}/runs", accessRead, "", s.scheduleRuns)

	// Queues and workers.
	s.handle(get, p+"/queues", accessRead, "", s.listQueues)
	s.handle(get, p+"/queues/{name}", accessRead, "", s.getQueue)
	s.handle(put, p+"/queues/{name}", accessOperate, "queues.set", s.setQueue)
	s.handle(post, p+"/queues/{name}/pause", accessOperate, "queues.pause", s.pauseQueue(true))
	s.handle(post, p+"/queues/{name}/resume", accessOperate, "queues.resume", s.pauseQueue(false))
	s.handle(get, p+"/workers", accessRead, "", s.listWorkers)
	s.handle(get, p+"/workflows/{name}/builds", accessRead, "", s.workflowBuilds)
	s.handle(post, p+"/workflows/{name}/builds/{build}/retire", accessOperate, "builds.retire", s.retireBuild)
	s.handle(get, p+"/stats", accessRead, "", s.stats)

	// The worker protocol. Claims and heartbeats are not audited.
	s.handle(post, p+"/tasks/claim", accessWorker, "", s.claim)
	s.handle(post, p+"/tasks/heartbeat", accessWorker, "", s.heartbeat)
	s.handle(post, p+"/tasks/complete", accessWorker, "tasks.complete", s.complete)
	s.handle(post, p+"/tasks/fail", accessWorker, "tasks.fail", s.failTask)

	// Principals, tokens, sessions and the audit log.
	s.handle(get, p+"/principals", accessAdmin, "", s.listPrincipals)
	s.handle(put, p+"/principals/{name}/groups", accessAdmin, "principals.groups", s.setGroups)
	s.handle(post, p+"/principals/{name}/disable", accessAdmin, "principals.disable", s.disablePrincipal)
	s.handle(post, p+"/sessions", accessAnyone, "sessions.create", s.signIn)
	s.handle(del, p+"/sessions/current", accessAnyone, "sessions.delete", s.signOut)
	s.handle(get, p+"/tokens", accessAdmin, "", s.listTokens)
	s.handle(post, p+"/tokens", accessAdmin, "tokens.create", s.createToken)
	s.handle(del, p+"/tokens/{id}", accessAdmin, "tokens.revoke", s.revokeToken)
	s.handle(get, p+"/audit", accessAdmin, "", s.listAudit)

	// Secrets: names and times to readers, values to nobody.
	s.handle(get, p+"/secrets", accessRead, "", s.listSecrets)
	s.handle(put, p+"/secrets/{name}", accessAdmin, "secrets.set", s.putSecret)
	s.handle(del, p+"/secrets/{name}", accessAdmin, "secrets.delete", s.deleteSecret)
	s.handle(post, p+"/secrets/rotate", accessAdmin, "secrets.rotate", s.rotateSecrets)

	// Webhooks.
	s.handle(post, p+"/webhooks", accessAdmin, "webhooks.create", s.createWebhook)
	s.handle(get, p+"/webhooks", accessRead, "", s.listWebhooks)
	s.handle(get, p+"/webhooks/{id}", accessRead, "", s.getWebhook)
	s.handle(del, p+"/webhooks/{id}", accessAdmin, "webhooks.delete", s.deleteWebhook)
	s.handle(get, p+"/webhooks/{id}/deliveries", accessRead, "", s.webhookDeliveries)
	s.handle(post, p+"/webhooks/{id}/test", accessAdmin, "webhooks.test", s.testWebhook)
	s.handle(http.MethodPatch, p+"/webhooks/{id}", accessAdmin, "webhooks.edit", s.editWebhook)
	s.handle(post, p+"/webhooks/{id}/enable", accessAdmin, "webhooks.enable", s.enableWebhook)
	s.handle(post, p+"/webhooks/{id}/disable", accessAdmin, "webhooks.disable", s.disableWebhook)
	s.handle(post, p+"/webhooks/{id}/rotate-secret", accessAdmin, "webhooks.rotate_secret", s.rotateWebhookSecret)
}

// registerInteractions lists the routes that act on a run (and the bulk
// operations), in their place in register's table.
func (s *Server) registerInteractions() {
	const p = Prefix
	get, post := http.MethodGet, http.MethodPost
	s.handle(post, p+"/runs/{id}/signals/{name}", accessOperate, "runs.signal", s.signal)
	s.handle(post, p+"/runs/{id}/updates/{name}", accessOperate, "runs.update", s.update)
	s.handle(post, p+"/runs/{id}/queries/{name}", accessRead, "runs.query", s.query)
	s.handle(post, p+"/runs/{id}/resume", accessOperate, "runs.resume", s.resume)
	s.handle(post, p+"/runs/{id}/steps/{step}/approve", accessDecide, "runs.approve", s.decide(true))
	s.handle(post, p+"/runs/{id}/steps/{step}/reject", accessDecide, "runs.reject", s.decide(false))
	s.handle(post, p+"/runs/{id}/cancel", accessOperate, "runs.cancel", s.cancel)
	s.handle(post, p+"/runs/{id}/pause", accessOperate, "runs.pause", s.pauseRun)
	s.handle(post, p+"/runs/{id}/unpause", accessOperate, "runs.unpause", s.unpauseRun)
	s.handle(post, p+"/runs/{id}/reset", accessOperate, "runs.reset", s.resetRun)
	s.handle(post, p+"/runs/{id}/retry", accessOperate, "runs.retry", s.retry)
	s.handle(post, p+"/runs/{id}/reset-workflow", accessOperate, "runs.reset_workflow", s.resetWorkflow)
	s.handle(get, p+"/approvals", accessApprovals, "", s.approvals)
	s.handle(post, p+"/operations", accessOperate, "operations.create", s.createOperation)
	s.handle(get, p+"/operations", accessRead, "", s.listOperations)
	s.handle(get, p+"/operations/{id}", accessRead, "", s.getOperation)
}

// serveOpenAPI answers the OpenAPI document (GET /openapi.json).
func serveOpenAPI(c *call) error {
	c.wrote = true
	c.w.Header().Set("Content-Type", "application/json")
	_, _ = c.w.Write(openAPI)
	return nil
}
