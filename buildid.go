package hephaestus

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"

	"github.com/hephaestus-go/hephaestus/store"
)

var defaultBuildID = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if ok {
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if modified == "true" {
				rev += "-dirty"
			}
			return rev
		}
		if v := info.Main.Version; v != "" && v != "(devel)" && checkBuildID(v) == nil {
			return v
		}
	}
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err == nil {
				return "exe-" + hex.EncodeToString(h.Sum(nil))[:12]
			}
		}
	}
	return "unknown"
})

// DefaultBuildID is the build id a Client takes when Config.BuildID is
// empty: the VCS revision the binary was built from (its first 12
// characters, with "-dirty" when the tree was modified), else the main
// module's version, else "exe-" and the start of the SHA-256 of the
// executable. It is computed once per process.
func DefaultBuildID() string { return defaultBuildID() }

// checkBuildID says what is wrong with a build id (store.CheckBuildID:
// at most store.MaxBuildID bytes of letters, digits, '.', '_', '-' and
// '+').
func checkBuildID(id string) error { return store.CheckBuildID(id) }

// BuildID returns the build id of this client's process (Config.BuildID).
func (c *Client) BuildID() string { return c.cfg.BuildID }
