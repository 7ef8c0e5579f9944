package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/job"
)

// Email is the argument of an example.email job.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// EmailKind sends an email (it stands in for a mailer); an email to no
// address cancels itself, since no retry can deliver it. It declares the
// example.hourly-digest schedule, which mails the digest every hour.
var EmailKind = job.MustNew(EmailJob, func(ctx context.Context, j *job.Job[Email]) error {
	if !strings.Contains(j.Args.To, "@") {
		return job.Cancel(fmt.Sprintf("no address to send %q to: %q", j.Args.Subject, j.Args.To))
	}
	return nil
}, &job.Options[Email]{
	MaxAttempts: 5,
	Timeout:     10 * time.Second,
	Schedules:   []job.Schedule{{ID: DigestID, Cron: "@hourly", Input: Email{To: "ops@example.com", Subject: "Hourly digest"}}},
})
