package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/webhookd/webhookd/internal/loadgen"
)

func benchCommand() *cobra.Command {
	var (
		cfg                         loadgen.Config
		scheme, source, cpuprofile  string
		logFile, logLevel           string
		asJSON, noProgress, keepDB  bool
		reuseDB                     bool
		databaseURL, redisURL, sink string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test the ack path: signed webhooks at a concurrency or a rate; throughput, latency, CPU, end to end, exactly-once",
		Long: `bench sends signed webhooks and reports ack throughput, latency percentiles
(HDR histogram), CPU per acknowledged event, peak RSS, the end-to-end rate
and drain time at its own sink, and an exactly-once check.

Without --target it runs webhookd (gateway and worker) in this process
against a database it creates and drops (--database-url names it), the
Redis queue "bench" (its keys are deleted at start and end), and a sink it
runs itself. With --naive the gateway is replaced by the naive ingest (one
INSERT and one Enqueue per request) for comparison.

With --target it sends to a running gateway, signing as the config's
--source does; --database-url and --sink-url, when given, enable the checks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var logOut io.Writer = io.Discard
			if logFile != "" {
				f, err := os.Create(logFile)
				if err != nil {
					return err
				}
				defer f.Close()
				logOut = f
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			// Logs go to a discarding JSON handler by default, so their
			// formatting cost stays part of the measurement.
			cfg.Log = slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))

			if cfg.Target != "" {
				src, err := benchTargetSource(cmd, source)
				if err != nil {
					return err
				}
				cfg.Source = &src
				if cmd.Flags().Changed("database-url") {
					cfg.DatabaseURL = databaseURL
				}
				cfg.SinkURL = sink
			} else {
				src, err := loadgen.BenchSource(scheme)
				if err != nil {
					return err
				}
				cfg.Source = &src
				cfg.Start = benchStart
				cfg.DatabaseURL = databaseURL
				cfg.FreshDatabase = true
				cfg.ReuseDatabase = reuseDB
				cfg.KeepDatabase = keepDB || reuseDB
			}
			cfg.RedisURL = redisURL
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				cfg.CPUProfile = f
			}
			if !noProgress && term.IsTerminal(int(os.Stderr.Fd())) {
				cfg.Progress = os.Stderr
			}
			rep, err := loadgen.Run(ctx, cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := rep.WriteText(out); err != nil {
				return err
			}
			if !rep.Check.Passed {
				return errors.New("exactly-once check failed")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&cfg.Concurrency, "concurrency", "c", 64, "requests in flight (closed loop), or connections sending (open loop)")
	f.Float64Var(&cfg.Rate, "rate", 0, "open loop: requests per second at steady spacing (latency from the intended send time); 0 = closed loop")
	f.DurationVarP(&cfg.Duration, "duration", "d", loadgen.Config{}.WithDefaults().Duration, "how long to send")
	f.Float64Var(&cfg.Duplicates, "duplicates", 0, "share of requests (0..1) that repeat an already-sent or preloaded event id")
	f.IntVar(&cfg.BodySize, "body-size", 1024, "body size in bytes")
	f.StringVar(&scheme, "scheme", "stripe", "signature scheme of the in-process source (stripe, github, standard, shopify, slack, hmac-sha256, none)")
	f.StringVar(&cfg.Target, "target", "", "base URL of a running gateway (default: run webhookd in this process)")
	f.StringVarP(&source, "source", "s", "", "with --target: the config's source to sign as (default: its first)")
	f.StringVar(&sink, "sink-url", "", "with --target: base URL of a running sink (webhookd sink) whose /stats to check")
	f.StringVar(&databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/webhookd_bench", "in-process: the database to create, use and drop; with --target: check its events table")
	f.StringVar(&redisURL, "redis-url", "redis://127.0.0.1:6379/0", "Redis for the queue")
	f.StringVar(&cfg.Queue, "queue", "bench", "Asynq queue (its keys are deleted at start and end)")
	f.BoolVar(&cfg.Naive, "naive", false, "replace webhookd's ingest with the naive one (one INSERT and one Enqueue per request)")
	f.BoolVar(&cfg.NoWorker, "no-worker", false, "run without the worker: acks measured with no deliveries competing for the CPU (no end-to-end figures, no sink check)")
	f.IntVar(&cfg.NaivePool, "naive-pool", 32, "the naive ingest's Postgres pool size")
	f.Int64Var(&cfg.Preload, "preload", 0, "insert this many events with COPY before sending (growth curve)")
	f.BoolVar(&keepDB, "keep-db", false, "keep the bench database at the end")
	f.BoolVar(&reuseDB, "reuse-db", false, "reuse a kept bench database (its preload stays, and --duplicates repeats its ids; everything else is reset); implies --keep-db")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", loadgen.Config{}.WithDefaults().DrainTimeout, "how long to wait for the queue to drain after sending")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the sending phase to this file (go tool pprof -tagignore role=loadgen for the server only)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bars (they show only on a terminal anyway)")
	f.StringVar(&logFile, "log-file", "", "write webhookd's JSON logs here (default: formatted, then discarded)")
	f.StringVar(&logLevel, "log-level", "info", "log level of the in-process webhookd")
	return cmd
}

// benchStart runs webhookd (the gateway when env.Gateway, the worker when
// env.Worker) in this process with a config generated from env.
func benchStart(ctx context.Context, env loadgen.Env) (string, func() error, error) {
	v := env.Source.Verify
	cfg := &config{
		path:        "bench (generated config)",
		Listen:      "127.0.0.1:0",
		DatabaseURL: env.DatabaseURL,
		RedisURL:    env.RedisURL,
		Queue:       env.Queue,
		Sources: []sourceConf{{
			Name: env.Source.Name,
			Verify: verifyConf{Scheme: v.Scheme, Secrets: v.Secrets, Tolerance: duration(v.Tolerance),
				Header: v.Header, Encoding: v.Encoding, Prefix: v.Prefix, TimestampHeader: v.TimestampHeader,
				SignedContent: v.SignedContent, PublicURL: v.PublicURL, AllowUnsigned: v.AllowUnsigned},
			EventID:      env.Source.EventID,
			Destinations: []destConf{{Name: env.Source.Destination, URL: env.SinkURL}},
		}},
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, cfg, roles{gateway: env.Gateway, worker: env.Worker}, env.Log, func(a net.Addr) { addrs <- a })
	}()
	select {
	case a := <-addrs:
		stop := func() error {
			cancel()
			return <-done
		}
		return "http://" + a.String(), stop, nil
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("webhookd stopped before listening")
		}
		return "", nil, err
	case <-ctx.Done():
		cancel()
		<-done
		return "", nil, ctx.Err()
	}
}

// benchTargetSource reads the source to sign as from the config file.
func benchTargetSource(cmd *cobra.Command, name string) (loadgen.Source, error) {
	cfg, err := configFrom(cmd)
	if err != nil {
		return loadgen.Source{}, err
	}
	for _, s := range cfg.Sources {
		if s.Name == name || name == "" {
			src := loadgen.Source{Name: s.Name, Verify: s.verifyConfig(), EventID: s.eventIDSpec()}
			if len(s.Destinations) > 0 {
				src.Destination = s.Destinations[0].Name
			}
			return src, nil
		}
	}
	return loadgen.Source{}, fmt.Errorf("no source %q in %s", name, cfg.path)
}
