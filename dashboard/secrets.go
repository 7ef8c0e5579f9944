package dashboard

import (
	"net/http"

	"github.com/hephaestus-go/hephaestus/server"
)

// secretsData is the secrets page's: names, key ids and times, never a
// value (the API has none to give).
type secretsData struct {
	Secrets []server.Secret
}

func (secretsData) PageTitle() string { return "Secrets" }
func (secretsData) Live() bool        { return false }

// secretsPage lists the named secrets.
func (d *Dashboard) secretsPage(r *http.Request) (string, any, error) {
	data := &secretsData{}
	if err := d.get(r, "/api/v1/secrets", nil, &data.Secrets); err != nil {
		return "", nil, err
	}
	return "secrets", data, nil
}
