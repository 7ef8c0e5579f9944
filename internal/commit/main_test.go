package commit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its committer: Close must stop the commit loops, so no
// goroutine may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
