// Command convkit maintains and migrates an AI-agent conversation store.
// See README.md and docs/CLI.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/convkit/convkit/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills at once
	}()
	os.Exit(cli.Main(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
