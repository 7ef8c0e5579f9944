package hephaestus

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// maxBuildID bounds Config.BuildID, in bytes.
const maxBuildID = 64

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

// checkBuildID says what is wrong with a build id.
func checkBuildID(id string) error {
	if len(id) > maxBuildID {
		return fmt.Errorf("%.20q… is %d bytes long; the limit is %d", id, len(id), maxBuildID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '+') {
			return fmt.Errorf("%q holds %q at byte %d: use letters, digits, '.', '_', '-' and '+'", id, c, i)
		}
	}
	return nil
}

// BuildID returns the build id of this client's process (Config.BuildID).
func (c *Client) BuildID() string { return c.cfg.BuildID }
