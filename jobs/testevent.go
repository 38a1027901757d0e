package jobs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/dedupe"
)

// TestEventType is the type of a test event, and TestEventPrefix starts
// its id: a synthetic event an operator sends a destination from its
// page to see that it answers.
const (
	TestEventType   = "webhookd.test"
	TestEventPrefix = "webhookd_test_"
)

// TestSender sends test events: one call, made now, by the
// destination's own kind (HTTP with its headers, auth and signature, or
// a broker's publish), with a key of its own
// (<source>:<destination>:webhookd_test_<random>) and the header
// Webhookd-Test: 1. A test event is never recorded: no event, run or
// attempt row, no metric, so it counts nowhere as a real event. The
// destination's when and transform rules are not applied (its body is
// webhookd's, not the source's sender's), and its concurrency, rate and
// circuit are not consulted: the operator asked for this one call.
type TestSender struct {
	routes RouteSource
	client *http.Client
	log    *slog.Logger
}

// NewTestSender returns a TestSender for the destinations of routes,
// calling HTTP ones with client (redirects are never followed; nil
// builds a client as the worker's default).
func NewTestSender(routes RouteSource, client *http.Client, log *slog.Logger) *TestSender {
	cfg := HandlerConfig{HTTPClient: client, Logger: log}.WithDefaults()
	return &TestSender{routes: routes, client: cfg.HTTPClient, log: cfg.Logger}
}

// TestResult is what a test event's call came to.
type TestResult struct {
	// Key is the call's Idempotency-Key, EventID its event's id.
	Key, EventID string
	// Delivered is true when the destination accepted it (2xx, or the
	// broker confirmed the publish).
	Delivered bool
	// StatusCode is the HTTP answer's status, 0 for a broker or no answer.
	StatusCode int
	// Error says why it was not delivered.
	Error    string
	Duration time.Duration
	// Answer is the start of what the destination answered.
	Answer dedupe.Answer
}

// testEventBody is a test event's payload.
type testEventBody struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Test      bool      `json:"test"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
	By        string    `json:"sent_by,omitempty"`
}

// Send calls source's destination with a new test event; by names who
// asked. It returns ErrUnknownSource or ErrUnknownDestination for a
// name not configured; a call that fails is a TestResult, not an error.
func (s *TestSender) Send(ctx context.Context, source, destination, by string) (TestResult, error) {
	dests, ok := s.routes.Load()[source]
	if !ok {
		return TestResult{}, fmt.Errorf("%w: %q", ErrUnknownSource, source)
	}
	dest, ok := dests[destination]
	if !ok {
		return TestResult{}, fmt.Errorf("%w: %q of source %q", ErrUnknownDestination, destination, source)
	}
	now := time.Now().UTC()
	id := TestEventPrefix + rand.Text()
	body, err := json.Marshal(testEventBody{ID: id, Type: TestEventType, Test: true, Source: source, CreatedAt: now, By: by})
	if err != nil {
		return TestResult{}, fmt.Errorf("error encoding a test event: %w", err)
	}
	key := Key(source, destination, id, 1)
	res := kindOf(dest).call(ctx, s.client, callRequest{
		dest: dest, key: key, source: source, eventID: id, eventType: TestEventType, call: 1,
		contentType: "application/json", body: body, test: true, now: now,
	})
	out := TestResult{
		Key: key, EventID: id, Delivered: res.outcome == dedupe.OutcomeDone, StatusCode: res.statusCode,
		Error: res.err, Duration: res.duration, Answer: res.answer,
	}
	s.log.InfoContext(ctx, "test event sent", "source", source, "destination", destination, "event_id", id, "key", key,
		"by", by, "delivered", out.Delivered, "status_code", out.StatusCode, "error", out.Error)
	return out, nil
}
