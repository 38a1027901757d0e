package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// ServerConfig configures the worker server.
type ServerConfig struct {
	// Queues are the Asynq queues to work, all with the same weight: the
	// shards of the queue and those of an earlier shard count that still
	// hold tasks (Shards.ServedQueues). Defaults to DefaultQueue alone.
	Queues []string
	// Concurrency is the number of tasks run at once. Defaults to 256:
	// a task mostly waits (on Redis, Postgres, the destination), and more
	// of them in flight make larger claim and outcome batches.
	Concurrency int
	// ShutdownTimeout bounds the wait for running tasks at shutdown.
	// Defaults to 20s.
	ShutdownTimeout time.Duration
	// Backoff spaces retries of errors that carry no delay of their own.
	Backoff Backoff
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Server runs deliver tasks.
type Server struct {
	srv *asynq.Server
	mux *asynq.ServeMux
}

// NewServer returns a worker server on rdb (shared, not closed by the
// server) that processes TypeDeliver tasks with h.
func NewServer(rdb redis.UniversalClient, h *Handler, cfg ServerConfig) *Server {
	queues := map[string]int{DefaultQueue: 1}
	if len(cfg.Queues) > 0 {
		queues = make(map[string]int, len(cfg.Queues))
		for _, q := range cfg.Queues {
			queues[q] = 1
		}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 256
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              cfg.Concurrency,
		Queues:                   queues,
		RetryDelayFunc:           retryDelayFunc(cfg.Backoff),
		IsFailure:                isFailure,
		Logger:                   newAsynqLogger(cfg.Logger),
		LogLevel:                 asynq.WarnLevel,
		ShutdownTimeout:          cfg.ShutdownTimeout,
		DelayedTaskCheckInterval: time.Second,
		TaskCheckInterval:        100 * time.Millisecond,
		BaseContext:              context.Background,
	})
	mux := asynq.NewServeMux()
	mux.Use(logMiddleware(cfg.Logger))
	mux.Handle(TypeDeliver, h)
	return &Server{srv: srv, mux: mux}
}

// Start starts processing in the background.
func (s *Server) Start() error {
	if err := s.srv.Start(s.mux); err != nil {
		return fmt.Errorf("error starting worker: %w", err)
	}
	return nil
}

// Shutdown stops fetching tasks, waits up to ShutdownTimeout for running
// ones, and puts the rest back on the queue.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
}
