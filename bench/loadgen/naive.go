package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/jobs"
)

// NaiveConfig configures NaiveServer.
type NaiveConfig struct {
	// DatabaseURL is a migrated webhookd database.
	DatabaseURL string
	// RedisURL selects the Redis database of the worker's queue.
	RedisURL string
	// Queue is the Asynq queue the worker reads.
	Queue string
	// Source is the one source served.
	Source Source
	// SinkURL is the destination's URL (for the task's timeout only).
	SinkURL string
	// PoolSize is the pgxpool size. Defaults to 32.
	PoolSize int
	// MaxBodyBytes caps a body. Defaults to 1 MiB.
	MaxBodyBytes int64
	// Listen is the address to listen on. Defaults to a free loopback
	// port.
	Listen string
}

// NaiveServer is the straightforward ingest issue 6 compares webhookd
// with: per request it verifies the signature, runs one single-row
// INSERT … ON CONFLICT in its own statement (autocommit, synchronous
// commit), enqueues one Asynq task with the job key as TaskID when the
// event is new, and answers. It writes the same tables and tasks as
// webhookd, so webhookd's worker drains it and the same checks apply. It
// is a yardstick, not a product path: an acknowledged event whose enqueue
// failed is lost.
type NaiveServer struct {
	// URL is the base URL it listens on.
	URL string

	pool     *pgxpool.Pool
	rdb      *redis.Client
	client   *asynq.Client
	enqueuer *jobs.Enqueuer
	verifier verify.Verifier
	eventID  eventid.Extractor
	src      Source
	maxBody  int64
	srv      *http.Server
}

// naiveInsertSQL records one delivery in one statement.
const naiveInsertSQL = `
INSERT INTO events AS e (source, external_id, content_type, headers, payload)
VALUES ($1, $2, $3, $4::jsonb, $5)
ON CONFLICT (source, external_id) DO UPDATE
    SET deliveries = e.deliveries + 1, last_received_at = now()
RETURNING e.deliveries, e.xmax = 0`

// StartNaive starts a NaiveServer on cfg.Listen. Close stops it.
func StartNaive(ctx context.Context, cfg NaiveConfig) (*NaiveServer, error) {
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 32
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	src := cfg.Source.withDefaults()
	v, err := verify.New(src.Verify)
	if err != nil {
		return nil, fmt.Errorf("error building verifier: %w", err)
	}
	ex, err := eventid.Parse(src.EventID)
	if err != nil {
		return nil, fmt.Errorf("error parsing event id spec: %w", err)
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	pc.MaxConns = int32(cfg.PoolSize)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("error opening pool: %w", err)
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("error parsing redis url: %w", err)
	}
	opts.PoolSize = 64
	rdb := redis.NewClient(opts)
	client := asynq.NewClientFromRedisClient(rdb)
	dest, err := jobs.NewDestination(jobs.DestinationSpec{Name: src.Destination, URL: cfg.SinkURL}, jobs.DestinationOptions{})
	if err != nil {
		pool.Close()
		return nil, err
	}
	routes := jobs.Routes{src.Name: {src.Destination: dest}}
	s := &NaiveServer{
		pool:     pool,
		rdb:      rdb,
		client:   client,
		enqueuer: jobs.NewEnqueuer(rdb, cfg.Queue, routes),
		verifier: v,
		eventID:  ex,
		src:      src,
		maxBody:  cfg.MaxBodyBytes,
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.POST("/webhooks/:source", s.ingest)
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.closeClients()
		return nil, err
	}
	s.srv = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	s.URL = "http://" + l.Addr().String()
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

func (s *NaiveServer) ingest(c echo.Context) error {
	req := c.Request()
	ctx := req.Context()
	if c.Param("source") != s.src.Name {
		return c.JSON(http.StatusNotFound, map[string]string{"error": "unknown source"})
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, s.maxBody+1))
	if err != nil {
		return c.JSON(http.StatusBadRequest, map[string]string{"error": "could not read body"})
	}
	if int64(len(body)) > s.maxBody {
		return c.JSON(http.StatusRequestEntityTooLarge, map[string]string{"error": "body too large"})
	}
	if err := s.verifier.Verify(verify.Request{Header: req.Header, Body: body, RawQuery: req.URL.RawQuery}, time.Now()); err != nil {
		return c.JSON(http.StatusUnauthorized, map[string]string{"error": err.Error()})
	}
	id, err := s.eventID.Extract(req.Header, body)
	if err != nil {
		return c.JSON(http.StatusBadRequest, map[string]string{"error": err.Error()})
	}
	headers, _ := json.Marshal(req.Header)
	var (
		deliveries int
		inserted   bool
	)
	err = s.pool.QueryRow(ctx, naiveInsertSQL, s.src.Name, id, req.Header.Get("Content-Type"), headers, body).
		Scan(&deliveries, &inserted)
	if err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"error": "storage unavailable, retry later"})
	}
	if !inserted {
		return c.JSON(http.StatusOK, map[string]any{"status": "duplicate", "event_id": id, "deliveries": deliveries})
	}
	if err := s.enqueuer.EnqueueEvent(ctx, s.src.Name, id); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return c.JSON(http.StatusInternalServerError, map[string]string{"error": "could not enqueue"})
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "accepted", "source": s.src.Name, "event_id": id})
}

// Close stops the server and closes its pool and Redis client.
func (s *NaiveServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.closeClients()
	return err
}

func (s *NaiveServer) closeClients() {
	_ = s.client.Close()
	_ = s.rdb.Close()
	s.pool.Close()
}
