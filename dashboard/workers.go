package dashboard

import (
	"net/http"

	"github.com/hephaestus-go/hephaestus/server"
)

// workersData is the workers page's.
type workersData struct {
	Workers []server.Worker
}

func (workersData) PageTitle() string { return "Workers" }
func (workersData) Live() bool        { return true }

// workersPage lists the live workers.
func (d *Dashboard) workersPage(r *http.Request) (string, any, error) {
	data := &workersData{}
	if err := d.get(r, "/api/v1/workers", nil, &data.Workers); err != nil {
		return "", nil, err
	}
	return "workers", data, nil
}
