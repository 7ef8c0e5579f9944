package replay_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// defaultRapidChecks is the number of cases each rapid property runs when
// neither -rapid.checks nor RAPID_CHECKS says otherwise (rapid's own default
// is 100).
const defaultRapidChecks = "300"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.checks" {
			explicit = true
		}
	})
	if _, env := os.LookupEnv("RAPID_CHECKS"); !explicit && !env && flag.Lookup("rapid.checks") != nil {
		if err := flag.Set("rapid.checks", defaultRapidChecks); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
