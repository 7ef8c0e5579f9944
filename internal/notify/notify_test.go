package notify

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// rotatingStore changes a webhook's secret, once, in the window between
// a pass's reading of the webhooks and its claim, as an operator's
// rotation racing the sender would.
type rotatingStore struct {
	store.Webhooks
	once   sync.Once
	rotate func(ctx context.Context)
}

func (r *rotatingStore) ClaimWebhookDeliveries(ctx context.Context, p *store.ClaimDeliveriesParams) ([]*store.WebhookDelivery, error) {
	r.once.Do(func() { r.rotate(ctx) })
	return r.Webhooks.ClaimWebhookDeliveries(ctx, p)
}

// TestSendSignsWithTheSecretAtClaim: an attempt claimed after a secret's
// rotation is signed with the new secret, even when the pass read the
// webhooks before the rotation.
func TestSendSignsWithTheSecretAtClaim(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		for _, secret := range []string{"old", "new"} {
			if Verify(secret, r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature), body, clk.Now(), time.Minute) == nil {
				got = append(got, secret)
			}
		}
	}))
	defer srv.Close()
	w := &store.Webhook{ID: "wh1", URL: srv.URL, Events: []string{"run.failed"}, Format: "json", Enabled: true,
		Secret: []byte("old"), CreatedAt: clk.Now()}
	if err := db.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	d := &store.WebhookDelivery{ID: "d1", WebhookID: w.ID, Event: "run.failed", Body: []byte(`{}`), NextAt: clk.Now()}
	if err := db.EnqueueWebhookDeliveries(ctx, &store.EnqueueDeliveriesParams{Deliveries: []*store.WebhookDelivery{d}, Now: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	rs := &rotatingStore{Webhooks: db, rotate: func(ctx context.Context) {
		if _, err := db.UpdateWebhook(ctx, &store.WebhookUpdate{ID: w.ID, Secret: &store.WebhookSecret{Secret: []byte("new")}}); err != nil {
			t.Error(err)
		}
	}}
	s := New(&Config{Store: rs, Clock: clk, Owner: "t", Secret: func(w *store.Webhook) (string, error) { return string(w.Secret), nil }})
	if _, err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "new" {
		t.Fatalf("the attempt verified with %v, want [new]: signed with the secret as read before the claim", got)
	}
}
