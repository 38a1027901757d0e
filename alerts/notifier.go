package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
)

// noticeClaimer claims the messages to send; *dedupe.Store satisfies it.
type noticeClaimer interface {
	ClaimIssueNotices(ctx context.Context, renotify time.Duration, limit int) ([]dedupe.IssueNotice, error)
}

// Notifier defaults.
const (
	// DefaultPoll is how often a Notifier looks for messages to send
	// when nothing woke it.
	DefaultPoll = 5 * time.Second
	// DefaultQueueSize is how many messages wait per channel; past it a
	// message is dropped (counted) rather than waiting.
	DefaultQueueSize = 256
	// DefaultAttempts is how many times a message is tried per channel.
	DefaultAttempts = 5
	// DefaultRetryWait is the wait before the second try; it doubles
	// up to a minute.
	DefaultRetryWait = time.Second
	// DefaultSendTimeout bounds one try.
	DefaultSendTimeout = 10 * time.Second
)

// claimBatch is how many messages of each type one pass claims.
const claimBatch = 100

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Channels are where messages go. Required (a Notifier without
	// channels has nothing to do).
	Channels []Channel
	// Renotify is the least time between messages about an open issue.
	// Defaults to DefaultRenotify.
	Renotify time.Duration
	// PublicURL is the admin's base URL as people reach it
	// (admin.public_url); a message links to
	// <PublicURL>/admin/view/issues/<id>. Empty links the path alone.
	PublicURL string
	// Poll defaults to DefaultPoll; QueueSize to DefaultQueueSize;
	// Attempts to DefaultAttempts; RetryWait to DefaultRetryWait;
	// SendTimeout to DefaultSendTimeout.
	Poll        time.Duration
	QueueSize   int
	Attempts    int
	RetryWait   time.Duration
	SendTimeout time.Duration
	// Registerer, when set, gets webhookd_alerts_sent_total.
	Registerer prometheus.Registerer
	// Logger receives one line per message sent or given up. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c NotifierConfig) WithDefaults() NotifierConfig {
	if c.Renotify <= 0 {
		c.Renotify = DefaultRenotify
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Attempts <= 0 {
		c.Attempts = DefaultAttempts
	}
	if c.RetryWait <= 0 {
		c.RetryWait = DefaultRetryWait
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return c
}

// Notifier sends the messages about issues. Run claims them in Postgres
// (one process claims each) and hands each to every channel's own queue
// and goroutine: a slow or hung channel delays only its own messages,
// and nothing here is on the delivery path (Wake never blocks).
type Notifier struct {
	store  noticeClaimer
	cfg    NotifierConfig
	wake   chan struct{}
	queues []chan Message
	sent   *prometheus.CounterVec
}

// NewNotifier returns a Notifier claiming messages in store
// (*dedupe.Store in production).
func NewNotifier(store noticeClaimer, cfg NotifierConfig) *Notifier {
	cfg = cfg.WithDefaults()
	n := &Notifier{store: store, cfg: cfg, wake: make(chan struct{}, 1),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhookd_alerts_sent_total",
			Help: "Alert messages per channel kind and outcome: sent, failed (every try failed) or dropped (the channel's queue was full).",
		}, []string{"channel", "outcome"})}
	for _, ch := range cfg.Channels {
		n.queues = append(n.queues, make(chan Message, cfg.QueueSize))
		for _, o := range []string{"sent", "failed", "dropped"} {
			n.sent.WithLabelValues(ch.Kind(), o)
		}
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(n.sent)
	}
	return n
}

// Wake asks Run to look for messages now (an issue opened or closed). It
// never blocks.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Run claims and sends messages until ctx ends: at once, when woken, and
// every Poll. Messages queued when ctx ends are dropped; their claims
// stand (a message is sent at most once).
func (n *Notifier) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, ch := range n.cfg.Channels {
		wg.Go(func() { n.drain(ctx, ch, n.queues[i]) })
	}
	tick := time.NewTicker(n.cfg.Poll)
	defer tick.Stop()
	for {
		n.claim(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-n.wake:
		case <-tick.C:
		}
	}
}

// claim claims the messages due and queues each for every channel.
func (n *Notifier) claim(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.SendTimeout)
	defer cancel()
	notices, err := n.store.ClaimIssueNotices(cctx, n.cfg.Renotify, claimBatch)
	if err != nil {
		if ctx.Err() == nil {
			n.cfg.Logger.WarnContext(ctx, "could not claim alert messages; trying again", slog.String("error", err.Error()))
		}
		return
	}
	for _, notice := range notices {
		m := Message{Type: notice.Type, Issue: notice.Issue, URL: fmt.Sprintf("%s/admin/view/issues/%d", n.cfg.PublicURL, notice.Issue.ID)}
		m.ID = fmt.Sprintf("issue_%d_%s_%d", m.Issue.ID, strings.TrimPrefix(m.Type, "issue."), time.Now().UnixMilli())
		for i, ch := range n.cfg.Channels {
			select {
			case n.queues[i] <- m:
			default:
				n.sent.WithLabelValues(ch.Kind(), "dropped").Inc()
				n.cfg.Logger.ErrorContext(ctx, "alert dropped: the channel's queue is full", n.attrs(ch, m)...)
			}
		}
	}
}

// drain sends ch's queued messages one after the other.
func (n *Notifier) drain(ctx context.Context, ch Channel, queue <-chan Message) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-queue:
			n.send(ctx, ch, m)
		}
	}
}

// send tries m on ch up to Attempts times, backing off, and counts how
// it ended.
func (n *Notifier) send(ctx context.Context, ch Channel, m Message) {
	wait := n.cfg.RetryWait
	var err error
	for try := 1; try <= n.cfg.Attempts; try++ {
		sctx, cancel := context.WithTimeout(ctx, n.cfg.SendTimeout)
		err = ch.Send(sctx, m)
		cancel()
		if err == nil {
			n.sent.WithLabelValues(ch.Kind(), "sent").Inc()
			n.cfg.Logger.InfoContext(ctx, "alert sent", append(n.attrs(ch, m), slog.Int("try", try))...)
			return
		}
		if try == n.cfg.Attempts || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return // shutting down
	}
	n.sent.WithLabelValues(ch.Kind(), "failed").Inc()
	n.cfg.Logger.ErrorContext(ctx, "alert not sent: every try failed", append(n.attrs(ch, m), slog.String("error", err.Error()))...)
}

// attrs are a message's log attributes.
func (n *Notifier) attrs(ch Channel, m Message) []any {
	return []any{slog.String("channel", ch.Kind()), slog.String("type", m.Type), slog.Int64("issue", m.Issue.ID),
		slog.String("source", m.Issue.Source), slog.String("destination", m.Issue.Destination)}
}
