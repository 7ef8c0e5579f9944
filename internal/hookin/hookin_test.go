package hookin_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/hookin"
)

var now = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

const secret = "whsec_0123456789abcdef"

func hexMAC(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reason(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var r *hookin.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a *Refusal", err)
	}
	return r.Reason
}

// TestGitHubVector: the example of GitHub's documentation on validating
// deliveries (secret, payload, signature) verifies.
func TestGitHubVector(t *testing.T) {
	h := &hookin.Hook{Name: "gh", Scheme: hookin.SchemeGitHub, Secret: "It's a Secret to Everybody"}
	hd := http.Header{"X-Hub-Signature-256": {"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}}
	if err := h.Verify(hd, []byte("Hello, World!"), now); err != nil {
		t.Fatal(err)
	}
	if got := reason(t, h.Verify(hd, []byte("Hello, World?"), now)); got != hookin.ReasonForged {
		t.Fatalf("a changed body: reason %q, want %q", got, hookin.ReasonForged)
	}
}

func TestGitHub(t *testing.T) {
	body := fixture(t, "github_push.json")
	h := &hookin.Hook{Name: "github", Scheme: hookin.SchemeGitHub, Secret: secret}
	hd := http.Header{
		"Content-Type":        {"application/json"},
		"X-Github-Event":      {"push"},
		"X-Github-Delivery":   {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		"X-Hub-Signature-256": {"sha256=" + hexMAC(secret, string(body))},
	}
	if err := h.Verify(hd, body, now); err != nil {
		t.Fatal(err)
	}
	e, err := h.Map(hd, body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "github.push" || e.ID != "github:72d3162e-cc78-11e3-81ab-4c9367dc0958" || string(e.Data) != string(body) {
		t.Fatalf("event %s %s %.40s", e.Name, e.ID, e.Data)
	}
	cases := map[string]struct {
		header, want string
	}{
		"missing":           {"", hookin.ReasonMissing},
		"other secret":      {"sha256=" + hexMAC("another-secret-0123", string(body)), hookin.ReasonForged},
		"not hex":           {"sha256=zz", hookin.ReasonForged},
		"sha1 only":         {"sha1=" + hexMAC(secret, string(body)), hookin.ReasonForged},
		"truncated":         {"sha256=" + hexMAC(secret, string(body))[:32], hookin.ReasonForged},
		"signature of body": {"sha256=" + hexMAC(secret, string(body)+" "), hookin.ReasonForged},
	}
	for name, c := range cases {
		h2 := hd.Clone()
		h2.Set("X-Hub-Signature-256", c.header)
		if got := reason(t, h.Verify(h2, body, now)); got != c.want {
			t.Errorf("%s: reason %q, want %q", name, got, c.want)
		}
	}
	// A form-encoded delivery is refused with what to change.
	h2 := hd.Clone()
	h2.Set("Content-Type", "application/x-www-form-urlencoded")
	if _, err := h.Map(h2, body); reason(t, err) != hookin.ReasonBadBody || !strings.Contains(err.Error(), "application/json") {
		t.Fatalf("form body: %v", err)
	}
}

func stripeHeader(key string, ts int64, body []byte) string {
	t := fmt.Sprint(ts)
	return "t=" + t + ",v1=" + hexMAC(key, t+"."+string(body)) + ",v0=" + hexMAC("unused-old-scheme", t)
}

func TestStripe(t *testing.T) {
	body := fixture(t, "stripe_invoice_paid.json")
	h := &hookin.Hook{Name: "billing", Scheme: hookin.SchemeStripe, Secret: secret}
	hd := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Stripe-Signature": {stripeHeader(secret, now.Add(-time.Minute).Unix(), body)}}
	if err := h.Verify(hd, body, now); err != nil {
		t.Fatal(err)
	}
	e, err := h.Map(hd, body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "billing.invoice.paid" || e.ID != "billing:evt_1NG8Du2eZvKYlo2CUI79vXWy" {
		t.Fatalf("event %s %s", e.Name, e.ID)
	}
	// Two v1 signatures (a secret being rolled): either matches.
	two := "t=" + fmt.Sprint(now.Unix()) + ",v1=" + hexMAC("old-secret-0123456789", fmt.Sprint(now.Unix())+"."+string(body)) + ",v1=" + hexMAC(secret, fmt.Sprint(now.Unix())+"."+string(body))
	if err := h.Verify(http.Header{"Stripe-Signature": {two}}, body, now); err != nil {
		t.Fatalf("rolled secrets: %v", err)
	}
	cases := map[string]struct {
		header, want string
	}{
		"missing":        {"", hookin.ReasonMissing},
		"no v1":          {"t=" + fmt.Sprint(now.Unix()), hookin.ReasonMissing},
		"expired":        {stripeHeader(secret, now.Add(-6*time.Minute).Unix(), body), hookin.ReasonExpired},
		"future":         {stripeHeader(secret, now.Add(6*time.Minute).Unix(), body), hookin.ReasonExpired},
		"forged":         {stripeHeader("another-secret-0123", now.Unix(), body), hookin.ReasonForged},
		"timestamp swap": {strings.Replace(stripeHeader(secret, now.Unix(), body), "t="+fmt.Sprint(now.Unix()), "t="+fmt.Sprint(now.Unix()-1), 1), hookin.ReasonForged},
	}
	for name, c := range cases {
		if got := reason(t, h.Verify(http.Header{"Stripe-Signature": {c.header}}, body, now)); got != c.want {
			t.Errorf("%s: reason %q, want %q", name, got, c.want)
		}
	}
	// A longer tolerance takes the 6-minute-old one.
	h.Tolerance = 10 * time.Minute
	if err := h.Verify(http.Header{"Stripe-Signature": {stripeHeader(secret, now.Add(-6*time.Minute).Unix(), body)}}, body, now); err != nil {
		t.Fatalf("tolerance 10m: %v", err)
	}
	if _, err := h.Map(http.Header{}, []byte(`{"id":"evt_1"}`)); reason(t, err) != hookin.ReasonBadEvent {
		t.Fatalf("no type: %v", err)
	}
}

func TestHMACAndBearer(t *testing.T) {
	body := []byte(`{"run":"r1"}`)
	h := &hookin.Hook{Name: "peer", Scheme: hookin.SchemeHMAC, Secret: secret, Event: "peer.notice"}
	ts := fmt.Sprint(now.Unix())
	hd := http.Header{"Heph-Timestamp": {ts}, "Heph-Signature": {"v1=" + hexMAC(secret, ts+"."+string(body))}, "Heph-Delivery-Id": {"whd_1"}, "Heph-Event": {"run.failed"}}
	if err := h.Verify(hd, body, now); err != nil {
		t.Fatal(err)
	}
	if e, err := h.Map(hd, body); err != nil || e.Name != "peer.notice" || e.ID != "peer:whd_1" {
		t.Fatalf("event %+v, %v", e, err)
	}
	if got := reason(t, h.Verify(hd, body, now.Add(time.Hour))); got != hookin.ReasonExpired {
		t.Fatalf("an hour later: %q", got)
	}
	if got := reason(t, h.Verify(hd, []byte(`{"run":"r2"}`), now)); got != hookin.ReasonForged {
		t.Fatalf("changed body: %q", got)
	}

	b := &hookin.Hook{Name: "ci", Scheme: hookin.SchemeBearer, Secret: secret}
	for hv, want := range map[string]string{"Bearer " + secret: "", "": hookin.ReasonMissing, "Bearer " + secret + "x": hookin.ReasonForged, "Basic " + secret: hookin.ReasonMissing, "Bearer " + secret[:10]: hookin.ReasonForged} {
		if got := reason(t, b.Verify(http.Header{"Authorization": {hv}}, body, now)); got != want {
			t.Errorf("Authorization %q: reason %q, want %q", hv, got, want)
		}
	}
	if e, err := b.Map(http.Header{"Idempotency-Key": {"k1"}}, body); err != nil || e.Name != "ci" || e.ID != "ci:k1" {
		t.Fatalf("bearer event %+v, %v", e, err)
	}
	if e, err := b.Map(http.Header{}, body); err != nil || e.ID != "" {
		t.Fatalf("no key: %+v, %v", e, err)
	}
	if _, err := b.Map(http.Header{}, []byte(`{"a":`)); reason(t, err) != hookin.ReasonBadBody {
		t.Fatalf("bad JSON: %v", err)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		h    hookin.Hook
		want string
	}{
		{hookin.Hook{Name: "ok", Scheme: "github", Secret: secret}, ""},
		{hookin.Hook{Name: "", Scheme: "github", Secret: secret}, "name"},
		{hookin.Hook{Name: "a/b", Scheme: "github", Secret: secret}, "name"},
		{hookin.Hook{Name: "x", Scheme: "", Secret: secret}, "scheme is required"},
		{hookin.Hook{Name: "x", Scheme: "gitlab", Secret: secret}, `scheme "gitlab"`},
		{hookin.Hook{Name: "x", Scheme: "stripe", Secret: "short"}, "secret: 5 bytes"},
		{hookin.Hook{Name: "x", Scheme: "stripe", Secret: secret, Tolerance: -time.Second}, "tolerance"},
	} {
		err := c.h.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.h, err, c.want)
		}
	}
}
