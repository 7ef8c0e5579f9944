package remote

import (
	"testing"

	"go.uber.org/goleak"
)

// The runtime starts no goroutine: none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
