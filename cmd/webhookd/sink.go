package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/internal/sink"
)

func sinkCommand() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Run a demo destination that logs each call and counts calls per Idempotency-Key (GET /stats)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
			l, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: sink.New(log), ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-cmd.Context().Done()
				_ = srv.Close()
			}()
			log.Info("sink listening", slog.String("addr", l.Addr().String()))
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9000", "address to listen on")
	return cmd
}
