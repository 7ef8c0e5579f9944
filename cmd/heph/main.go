// Command heph is the Hephaestus command line; see app/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hephaestus-go/hephaestus/app/cli"
)

func main() {
	if cli.IsVetTool(os.Args[1:]) {
		cli.RunVetTool() // go vet -vettool=heph: exits
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
