// Command webhookd-bench load-tests webhookd: signed webhooks at a
// concurrency or a rate, against webhookd started in this process as every
// deployment assembles it, or against a running gateway; it reports ack
// throughput and latency, CPU per ack, the end-to-end rate and an
// exactly-once check (docs/performance.md). It is a program of its own so
// the product binary carries only the product.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/webhookd/webhookd/bench/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := benchCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhookd-bench:", err)
		os.Exit(1)
	}
}

func benchCommand() *cobra.Command {
	var (
		cfg                         loadgen.Config
		scheme, source, cpuprofile  string
		logFile, logLevel           string
		asJSON, noProgress, keepDB  bool
		reuseDB                     bool
		databaseURL, redisURL, sink string
		plotFile                    string
		secrets                     []string
		ext                         externalFlags
	)
	cmd := &cobra.Command{
		Use:           "webhookd-bench",
		SilenceUsage:  true,
		SilenceErrors: true,
		Short:         "Load-test the ack path: signed webhooks at a concurrency or a rate; throughput, latency, CPU, end to end, exactly-once",
		Long: `bench sends signed webhooks and reports ack throughput, latency percentiles
(HDR histogram), CPU per acknowledged event, peak RSS, the end-to-end rate
and drain time at its own sink, and an exactly-once check.

Without --target it runs webhookd (gateway and worker) in this process
against a database it creates and drops (--database-url names it), the
Redis queue "bench" (its keys are deleted at start and end), and a sink it
runs itself. With --naive the gateway is replaced by the naive ingest (one
INSERT and one Enqueue per request) for comparison.

With --serve ADDR it runs the same server on ADDR and sends nothing: an
outside generator (wrk, docs/ack-compare.sh) sends the requests that
--write-requests wrote, and the report counts the acks from the database
and the CPU without the generator.

With --target it sends to a running gateway's --source, signed with
--scheme and --secret as that source's sender would; --database-url and
--sink-url, when given, enable the checks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if done, err := ext.write(ctx, scheme, cfg.BodySize); done {
				return err
			}
			if ext.serve != "" && plotFile != "" {
				return errors.New("--plot draws the in-process generator's timeline; --serve has none (wrk reports the load)")
			}
			if plotFile != "" {
				if _, err := plotFormat(plotFile); err != nil {
					return err
				}
			}
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
				src, err := targetSource(source, scheme, secrets)
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
			rep, err := ext.run(ctx, cfg, cmd.ErrOrStderr())
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
			if plotFile != "" {
				if err := writePlot(plotFile, rep); err != nil {
					return err
				}
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
	f.Float64Var(&cfg.BadSignatures, "bad-signatures", 0, "share of requests (0..1) sent with a wrong signature (answered 401 and recorded as rejected; not in the check or the ack latency)")
	f.IntVar(&cfg.BodySize, "body-size", 1024, "body size in bytes")
	f.StringVar(&scheme, "scheme", "stripe", "signature scheme (every verify scheme but twilio, msgraph, linear, mailgun, adyen and square): of the in-process source, or with --target of --source")
	f.StringVar(&cfg.Target, "target", "", "base URL of a running gateway (default: run webhookd in this process)")
	f.StringVarP(&source, "source", "s", "", "with --target: the source to send to (the :source of /webhooks/:source)")
	f.StringArrayVar(&secrets, "secret", nil, "with --target: the source's signing secret (as in its verify.secrets)")
	f.StringVar(&sink, "sink-url", "", "with --target: base URL of a running sink (webhookd sink) whose /stats to check")
	f.StringVar(&databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/webhookd_bench", "in-process: the database to create, use and drop; with --target: check its events table")
	f.StringVar(&redisURL, "redis-url", "redis://127.0.0.1:6379/0", "Redis for the queue")
	f.StringVar(&cfg.Queue, "queue", "bench", "Asynq queue (its keys are deleted at start and end)")
	f.BoolVar(&cfg.Naive, "naive", false, "replace webhookd's ingest with the naive one (one INSERT and one Enqueue per request)")
	f.StringVar(&cfg.Rules.When, "when", "", "the destination's when rule (CEL), to measure what rules cost; the bench's bodies are Stripe-like: body.data.object.id, body.created")
	f.StringVar(&cfg.Rules.Transform, "transform", "", "the destination's transform rule (CEL), e.g. '{\"id\": event.id, \"object\": body.data.object.id}'")
	f.BoolVar(&cfg.NoWorker, "no-worker", false, "run without the worker: acks measured with no deliveries competing for the CPU (no end-to-end figures, no sink check)")
	f.IntVar(&cfg.NaivePool, "naive-pool", 32, "the naive ingest's Postgres pool size")
	f.Int64Var(&cfg.Preload, "preload", 0, "insert this many events with COPY before sending (growth curve)")
	f.BoolVar(&keepDB, "keep-db", false, "keep the bench database at the end")
	f.BoolVar(&reuseDB, "reuse-db", false, "reuse a kept bench database (its preload stays, and --duplicates repeats its ids; everything else is reset); implies --keep-db")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", loadgen.Config{}.WithDefaults().DrainTimeout, "how long to wait for the queue to drain after sending")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the sending phase to this file (go tool pprof -tagignore role=loadgen for the server only)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&plotFile, "plot", "", "also draw the run to this .png or .svg: acks/s and deliveries/s over the run, and the ack-latency histogram")
	f.StringVar(&cfg.Label, "label", "", "name the run in the report and as the plot's title, e.g. ack64/webhookd")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bars (they show only on a terminal anyway)")
	f.StringVar(&logFile, "log-file", "", "write webhookd's JSON logs here (default: formatted, then discarded)")
	f.StringVar(&logLevel, "log-level", "info", "log level of the in-process webhookd")
	ext.add(f)
	return cmd
}

// targetSource is the source a running gateway receives as name, signed
// with scheme and secrets, its event id where the scheme puts it by
// default (or in a header of the generator's own for schemes without one).
func targetSource(name, scheme string, secrets []string) (loadgen.Source, error) {
	if name == "" {
		return loadgen.Source{}, errors.New("--target needs --source")
	}
	if scheme != "none" && len(secrets) == 0 {
		return loadgen.Source{}, errors.New("--target needs the source's --secret")
	}
	src, err := loadgen.BenchSource(scheme)
	if err != nil {
		return loadgen.Source{}, err
	}
	src.Name = name
	if len(secrets) > 0 {
		src.Verify.Secrets = secrets
	}
	return src, nil
}
