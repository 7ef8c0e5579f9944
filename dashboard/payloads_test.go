package dashboard_test

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
)

// On a server that encrypts payloads, the run page shows a reader
// "encrypted" in place of the input and output (and the run's name and
// status as for anyone), and shows an admin the values.
func TestPayloadsEncryptedForReaders(t *testing.T) {
	t.Parallel()
	const mark = "DaShMaRk-91b0"
	e := newEnvWith(t, false, func(c *heph.Config) {
		sum := sha256.Sum256([]byte("dashboard payload key"))
		ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: []codec.Key{{ID: "k1", Secret: sum[:]}}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := codec.NewAESGCM(ring)
		if err != nil {
			t.Fatal(err)
		}
		if c.PayloadCodec, err = codec.NewChain(&codec.ChainConfig{Codecs: []codec.Codec{a}}); err != nil {
			t.Fatal(err)
		}
	})
	id := e.start("order", order{ID: mark, Amount: 5})
	e.waitStatus(id, heph.StatusCompleted)
	_, _, reader, err := server.NewToken(context.Background(), e.client.Store().(store.Admin), &server.TokenParams{Principal: "rita", Role: server.RoleRead}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + id)
	if in := b.text("#run-input"); !strings.Contains(in, mark) {
		t.Errorf("the admin sees the input %q", in)
	}

	r := newBrowser(t)
	r.login(e.url, reader)
	r.open(e.url + "/runs/" + id)
	in, out := r.text("#run-input"), r.text("#run-output")
	if strings.Contains(in, mark) || !strings.Contains(in, "encrypted") || !strings.Contains(out, "encrypted") {
		t.Errorf("the reader sees input %q, output %q", in, out)
	}
	var page string
	r.eval(`document.querySelector("main").innerText`, &page)
	if strings.Contains(page, mark) || !strings.Contains(page, "order") || !strings.Contains(page, "completed") {
		t.Errorf("the reader's run page:\n%s", page)
	}
	r.noErrors("the run page of a reader")
}
