package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/webhookd/webhookd/bench/loadgen"
	"github.com/webhookd/webhookd/gateway/verify"
)

// externalFlags are the flags of a run whose load comes from an outside
// generator such as wrk (docs/ack-compare.sh): the server-only mode and
// the presigned requests it sends.
type externalFlags struct {
	serve         string
	writeRequests string
	requests      int
}

func (e *externalFlags) add(f *pflag.FlagSet) {
	f.StringVar(&e.serve, "serve", "", "server only: run webhookd (or --naive) on this address and send nothing; measure what an outside generator (wrk) sends, from its first connection to its last")
	f.StringVar(&e.writeRequests, "write-requests", "", "write --requests presigned requests (--scheme, --body-size, each a new event id) to this file for wrk and docs/wrk/presigned.lua, then exit")
	f.IntVar(&e.requests, "requests", 225000, "with --write-requests: how many (each is sent once; 225,000 cover 15 s at 15,000/s)")
}

// write writes the presigned requests, when asked; done reports whether
// it did.
func (e *externalFlags) write(ctx context.Context, scheme string, bodySize int) (done bool, err error) {
	if e.writeRequests == "" {
		return false, nil
	}
	switch scheme {
	case verify.SchemeSendGrid:
		return true, errors.New("--write-requests: the bench's sendgrid key is made afresh in each run, so a server would not verify requests written earlier")
	case verify.SchemePaddle:
		return true, errors.New("--write-requests: paddle's 5 s timestamp tolerance is too short for presigned requests")
	}
	src, err := loadgen.BenchSource(scheme)
	if err != nil {
		return true, err
	}
	f, err := os.Create(e.writeRequests)
	if err != nil {
		return true, err
	}
	if err := loadgen.WriteRequests(ctx, f, src, e.requests, bodySize); err != nil {
		_ = f.Close()
		return true, err
	}
	return true, f.Close()
}

// run runs the bench: loadgen.Run, or with --serve loadgen.Serve, which
// prints a ready line on stderr once the server answers.
func (e *externalFlags) run(ctx context.Context, cfg loadgen.Config, stderr io.Writer) (*loadgen.Report, error) {
	if e.serve == "" {
		return loadgen.Run(ctx, cfg)
	}
	cfg.Listen = e.serve
	return loadgen.Serve(ctx, cfg, func(baseURL string) {
		fmt.Fprintf(stderr, "ready: %s/webhooks/%s (send now; measured from the first connection to the last)\n", baseURL, cfg.Source.Name)
	})
}
