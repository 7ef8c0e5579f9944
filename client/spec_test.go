package client_test

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"testing"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// operations maps each operation of the server's OpenAPI document to the
// Client method that calls it. A new operation fails this test until it
// has a method here.
var operations = map[string]string{
	"healthz": "Health", "readyz": "Ready", "openapi": "OpenAPI", "receiveHook": "ReceiveHook", "whoami": "Whoami",
	"startRun": "StartRun", "listRuns": "ListRuns", "getRun": "GetRun", "deleteRun": "DeleteRun",
	"runHistory": "History", "runResult": "Result", "runState": "State", "runSteps": "RunSteps", "runEventWaits": "RunEventWaits",
	"signal": "Signal", "update": "Update", "query": "Query", "resume": "Resume", "approve": "Decide", "reject": "Decide",
	"cancel": "Cancel", "pauseRun": "Pause", "unpauseRun": "Unpause", "resetRun": "Reset", "retry": "Retry",
	"approvals": "PendingApprovals", "createOperation": "StartOperation", "listOperations": "ListOperations", "getOperation": "GetOperation",
	"definitions": "Definitions", "graph": "GraphJSON", "putDocument": "PutDocument", "listDocuments": "ListDocuments",
	"validateDocument": "ValidateDocument", "getDocument": "GetDocument",
	"sendEvent": "SendEvent", "listEvents": "Events", "getEvent": "GetEvent",
	"listTriggers": "Triggers", "getTrigger": "GetTrigger", "putTrigger": "PutTrigger", "deleteTrigger": "DeleteTrigger", "listTriggerGroups": "TriggerGroups",
	"listSchedules": "Schedules", "createSchedule": "CreateSchedule", "getSchedule": "GetSchedule", "updateSchedule": "UpdateSchedule",
	"deleteSchedule": "DeleteSchedule", "pauseSchedule": "ScheduleAction", "resumeSchedule": "ScheduleAction", "triggerSchedule": "ScheduleAction",
	"backfillSchedule": "Backfill", "nextFires": "NextFires", "scheduleRuns": "ScheduleRuns",
	"listQueues": "Queues", "getQueue": "GetQueue", "setQueue": "SetQueue", "pauseQueue": "PauseQueue", "resumeQueue": "PauseQueue",
	"listWorkers": "Workers", "getStats": "Stats",
	"claimTasks": "ClaimTasks", "heartbeatTask": "Heartbeat", "completeTask": "CompleteTask", "failTask": "FailTask",
	"listTokens": "Tokens", "createToken": "CreateToken", "revokeToken": "RevokeToken", "listAudit": "Audit",
	"listPrincipals": "Principals", "setPrincipalGroups": "SetGroups", "disablePrincipal": "DisablePrincipal",
	"createSession": "CreateSession", "deleteSession": "DeleteSession",
	"listSecrets": "Secrets", "putSecret": "SetSecret", "deleteSecret": "DeleteSecret", "rotateSecrets": "RotateSecrets",
	"listVersions": "Versions", "getVersionRule": "GetVersionRule", "putVersionRule": "SetVersionRule", "deleteVersionRule": "ClearVersionRule",
	"retireVersion": "SetVersionState", "unretireVersion": "SetVersionState", "deleteVersion": "SetVersionState",
	"exportRunHistory": "ExportHistory", "runLogs": "Logs", "definition": "Definition",
	"listWorkflowBuilds": "WorkflowBuilds", "retireWorkflowBuild": "RetireBuild",
	"listWebhooks": "Webhooks", "createWebhook": "CreateWebhook", "getWebhook": "Webhook", "deleteWebhook": "DeleteWebhook",
	"editWebhook": "EditWebhook", "listWebhookDeliveries": "WebhookDeliveries", "testWebhook": "TestWebhook",
	"enableWebhook": "EnableWebhook", "disableWebhook": "DisableWebhook", "rotateWebhookSecret": "RotateWebhookSecret",
	"runsEvents": "RunsEvents", "runEvents": "RunEvents", "resetWorkflow": "ResetWorkflow",
}

// specOperations reads the operation ids of the server's OpenAPI document.
func specOperations(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../server/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			var o struct {
				OperationID string `json:"operationId"`
			}
			if err := json.Unmarshal(op, &o); err != nil || o.OperationID == "" {
				if method != "parameters" {
					t.Errorf("%s %s has no operationId", method, path)
				}
				continue
			}
			ids = append(ids, o.OperationID)
		}
	}
	sort.Strings(ids)
	return ids
}

// Every operation of the API has a Client method, and the table names no
// operation the API lacks.
func TestEveryOperationHasAMethod(t *testing.T) {
	ids := specOperations(t)
	if len(ids) < 100 {
		t.Fatalf("read %d operations from the OpenAPI document; expected over 100", len(ids))
	}
	typ := reflect.TypeFor[*apiclient.Client]()
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
		m, ok := operations[id]
		if !ok {
			t.Errorf("operation %s has no Client method: add one, and a row to this test's table", id)
			continue
		}
		if _, ok := typ.MethodByName(m); !ok {
			t.Errorf("operation %s: Client has no method %s", id, m)
		}
	}
	for id := range operations {
		if !seen[id] {
			t.Errorf("the table names %s, which the OpenAPI document does not have", id)
		}
	}
}
