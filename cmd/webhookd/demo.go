package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/config"
	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/migrations"
)

// demoConfig is the file -f names, else webhookd.example.yaml here, else
// the built-in copy of it (which cannot be reloaded: there is no file).
func demoConfig(cmd *cobra.Command) (*config.Config, error) {
	if cmd.Flags().Changed("config") {
		return configFrom(cmd)
	}
	cfg, err := config.Load(webhookd.ExampleConfigPath)
	if !errors.Is(err, fs.ErrNotExist) {
		return cfg, err
	}
	if cfg, err = config.Parse("(built-in "+webhookd.ExampleConfigPath+")", webhookd.ExampleConfig, os.LookupEnv); err != nil {
		return nil, err
	}
	cfg.Path = ""
	return cfg, nil
}

func demoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run gateway, worker and the demo sink together (creates the database if missing)",
		Long: "Run gateway, worker and the demo sink together (creates the database if missing).\n\n" +
			"demo reads " + webhookd.ExampleConfigPath + " from the current directory, or its built-in copy when there is none; -f names another file.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := demoConfig(cmd)
			if err != nil {
				return err
			}
			log := newLogger(cfg.LogLevel)
			ctx := cmd.Context()
			if !cfg.File.HasAdminTokens() && !cfg.File.Admin.UnsafeTokenlessLoopback {
				if err := demoAdminToken(cfg, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			if err := migrations.EnsureDatabase(ctx, cfg.Process.DatabaseURL, log); err != nil {
				return err
			}
			// Serve the sink wherever the config's destinations point on
			// this machine.
			started := map[string]bool{}
			for _, s := range cfg.File.Sources {
				for _, d := range s.Destinations {
					u, err := url.Parse(d.URL)
					if err != nil || started[u.Host] {
						continue
					}
					l, err := net.Listen("tcp", u.Host)
					if err != nil {
						return fmt.Errorf("error starting the demo sink on %s: %w", u.Host, err)
					}
					started[u.Host] = true
					srv := &http.Server{Handler: sink.New(log.With(slog.String("component", "sink"))), ReadHeaderTimeout: 5 * time.Second}
					go func() { _ = srv.Serve(l) }()
					defer srv.Close()
					log.InfoContext(ctx, "demo sink listening", slog.String("addr", u.Host))
				}
			}
			return serve(ctx, cfg, webhookd.Roles{Gateway: true, Worker: true}, log)
		},
	}
	return cmd
}

// demoAdminToken gives a demo without an admin token a random one for
// this run and prints it (to stderr: stdout is the JSON log), so a
// newcomer can open the event browser the way it is deployed, with a
// token, rather than by opting in to tokenless admin.
func demoAdminToken(cfg *config.Config, w io.Writer) error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("error making a demo admin token: %w", err)
	}
	token := hex.EncodeToString(b)
	cfg.Process.Admin.Tokens = []string{token}
	port := "8080"
	if _, p, err := net.SplitHostPort(cfg.Process.Listen); err == nil {
		port = p
	}
	fmt.Fprintf(w, "webhookd demo: admin token for this run (set WEBHOOKD_ADMIN_TOKEN to choose one):\n\n"+
		"    export T=%s\n    export WEBHOOKD_ADMIN_TOKEN=$T\n\nSign in at http://localhost:%s/admin/ with it; API clients send Authorization: Bearer $T;\n"+
		"webhookd events, replay and destinations read $WEBHOOKD_ADMIN_TOKEN.\n\n",
		token, port)
	return nil
}
