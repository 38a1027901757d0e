// Package alerts tells people about issues (SPEC: "Issues and alerts"):
// one message when an issue opens, one when it closes, and at most one
// reminder per renotify while it stays open, each linking to the issue's
// page. A kind of channel (Slack, a signed webhook, email) is one small
// adapter behind Channel, built once from the configuration; the
// Notifier claims each message in Postgres (so one process sends it),
// queues it per channel, and sends it off the delivery path with
// retries, counted in webhookd_alerts_sent_total.
package alerts

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/field"
)

// Message types (the webhook channel's "type").
const (
	TypeOpened   = dedupe.NoticeOpened
	TypeClosed   = dedupe.NoticeClosed
	TypeReminder = dedupe.NoticeReminder
)

// Message is what a channel sends: the webhook channel's JSON body.
type Message struct {
	// Type is TypeOpened, TypeClosed or TypeReminder.
	Type  string       `json:"type"`
	Issue dedupe.Issue `json:"issue"`
	// URL is the issue's page.
	URL string `json:"url"`
	// ID names this message on every try (the webhook channel's
	// webhook-id), so a receiver can drop a repeat.
	ID string `json:"-"`
}

// Summary is the message in one line, for chat and email subjects.
func (m Message) Summary() string {
	i := m.Issue
	what := "opened"
	switch m.Type {
	case TypeClosed:
		what = i.State
	case TypeReminder:
		what = "still open"
	}
	return fmt.Sprintf("webhookd issue #%d %s: %s -> %s failing with %s (%d failures, %d events)",
		i.ID, what, i.Source, i.Destination, i.Cause, i.Count, i.EventCount)
}

// Channel sends messages to one place. Send returns an error when the
// message may not have arrived; the Notifier retries it. Errors never
// carry the channel's credentials.
type Channel interface {
	// Kind names the channel's kind for logs and metrics ("slack").
	Kind() string
	// Send sends m, giving up when ctx ends.
	Send(ctx context.Context, m Message) error
}

// DefaultRenotify is how long an issue stays open before a reminder.
const DefaultRenotify = time.Hour

// Spec is the configuration's alerts: block.
type Spec struct {
	// Renotify is the least time between messages about an open issue.
	// Defaults to DefaultRenotify.
	Renotify time.Duration `yaml:"renotify"`
	// Channels are where messages go, one kind each.
	Channels []ChannelSpec `yaml:"channels"`
}

// ChannelSpec is one channel; exactly one of its fields is set.
type ChannelSpec struct {
	Slack   *SlackSpec   `yaml:"slack"`
	Webhook *WebhookSpec `yaml:"webhook"`
	Email   *EmailSpec   `yaml:"email"`
}

// NewChannels checks s and builds its channels, once, at start: every
// problem is returned joined, each a *field.Error at its key path
// ("channels[0].slack.webhook_url").
func NewChannels(s Spec) ([]Channel, error) {
	var errs []error
	if s.Renotify < 0 {
		errs = append(errs, field.Errorf("renotify", "must not be negative"))
	}
	var out []Channel
	for i, c := range s.Channels {
		path := field.Index("channels", i)
		n := 0
		for _, set := range []bool{c.Slack != nil, c.Webhook != nil, c.Email != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Errorf(path, "name exactly one of slack, webhook or email"))
			continue
		}
		var (
			ch  Channel
			err error
		)
		switch {
		case c.Slack != nil:
			ch, err = newSlack(*c.Slack)
			err = field.Prefix(path+".slack", err)
		case c.Webhook != nil:
			ch, err = newWebhook(*c.Webhook)
			err = field.Prefix(path+".webhook", err)
		default:
			ch, err = newEmail(*c.Email)
			err = field.Prefix(path+".email", err)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ch)
	}
	return out, errors.Join(errs...)
}

// checkHTTPURL returns an error at key when raw is not an absolute
// http(s) URL; the error never repeats the URL (it may hold a token).
func checkHTTPURL(key, raw string) error {
	if raw == "" {
		return field.Errorf(key, "is required")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return field.Errorf(key, "must be an absolute http:// or https:// URL")
	}
	return nil
}

// callError describes a failed HTTP call without its URL (which may hold
// a token: a Slack webhook's path is its credential).
func callError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
