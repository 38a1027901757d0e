package listen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/admin/adminclient"
)

// Config configures a listen run.
type Config struct {
	// Admin calls the gateway's admin API with its token (a read-only
	// one is enough; never printed). Required.
	Admin *adminclient.Client
	// ForwardTo is the URL each event is POSTed to. Required; on this
	// machine (loopback) unless AllowRemote.
	ForwardTo string
	// AllowRemote lets ForwardTo name another machine.
	AllowRemote bool
	// Source keeps one source's events; empty keeps all.
	Source string
	// Type keeps the events whose type matches this glob; empty keeps
	// all.
	Type string
	// From is where to start: "now", a cursor (as a printed line or the
	// state file shows it), or a time (RFC 3339, or a duration back from
	// now such as 1h). Empty resumes from the state file, else starts
	// now. Given, it wins over the state file.
	From string
	// Resign is a development secret: each event is forwarded signed
	// with it by its source's scheme, in place of the sender's
	// signature. Empty forwards without a signature.
	Resign string
	// StatePath is the state file. Defaults to DefaultStatePath of the
	// gateway.
	StatePath string
	// JSON prints one JSON object per event (and per notice) instead of
	// text.
	JSON bool
	// Out receives a line per event. Defaults to os.Stdout.
	Out io.Writer
	// Err receives notices (resuming, behind, retrying). Defaults to
	// os.Stderr.
	Err io.Writer
	// LocalTimeout bounds one call to ForwardTo (and so how long a stop
	// waits for the call in flight). Defaults to 10s.
	LocalTimeout time.Duration
	// RetryMax is the longest wait between tries of ForwardTo or of the
	// gateway while either is down. Defaults to 2s.
	RetryMax time.Duration
	// Wait is how long one request to the gateway waits for an event
	// (the stream's long poll). Defaults to 10s, the most it allows.
	Wait time.Duration
}

// Defaults of Config.
const (
	DefaultLocalTimeout = 10 * time.Second
	DefaultRetryMax     = 2 * time.Second
	DefaultWait         = 10 * time.Second
	// retryMin is the first wait after a failed try.
	retryMin = 200 * time.Millisecond
	// behindEvery is how often a reader that is behind says by how much.
	behindEvery = 5 * time.Second
)

// WithDefaults returns a copy of c with zero fields set to their
// defaults (StatePath excepted: Run finds it).
func (c Config) WithDefaults() Config {
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Err == nil {
		c.Err = os.Stderr
	}
	if c.LocalTimeout <= 0 {
		c.LocalTimeout = DefaultLocalTimeout
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	return c
}

// cursorPattern is a feed cursor as the gateway writes it.
var cursorPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// listener is one run's state.
type listener struct {
	cfg       Config
	server    *url.URL
	stream    *streamClient
	fwd       *forwarder
	out       *printer
	statePath string
	state     state
}

// Run follows the gateway's events and forwards each to cfg.ForwardTo
// until ctx ends (then it returns nil once the call in flight has its
// answer and the state file its cursor). It returns an error for a
// configuration it cannot run (ErrRemoteForward among them), a gateway
// that refuses the stream for good (wrapping *adminclient.APIError: a
// wrong token, an unknown source), or a state file it cannot read or
// write.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.WithDefaults()
	if cfg.Admin == nil {
		return errors.New("listen: no gateway (--server)")
	}
	server := cfg.Admin.Server()
	target, err := checkForwardTo(cfg.ForwardTo, cfg.AllowRemote)
	if err != nil {
		return err
	}
	l := &listener{
		cfg:    cfg,
		server: server,
		stream: newStreamClient(cfg.Admin, cfg.Source, cfg.Type, cfg.Wait),
		fwd: &forwarder{
			target: target, resign: cfg.Resign, now: time.Now,
			client: &http.Client{
				Timeout: cfg.LocalTimeout,
				// Never followed: the payload goes to the given URL only.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			},
		},
		out:       &printer{out: cfg.Out, err: cfg.Err, json: cfg.JSON},
		statePath: cfg.StatePath,
	}
	told := map[string]bool{}
	l.fwd.unsigned = func(source string, err error) {
		if !told[source] {
			told[source] = true
			l.out.notice(fmt.Sprintf("source %s: %v; its events go out as recorded, without a signature", source, err))
		}
	}
	if l.statePath == "" {
		if l.statePath, err = DefaultStatePath(server); err != nil {
			return err
		}
	}
	if l.state, err = loadState(l.statePath); err != nil {
		return err
	}
	if id := serverID(server); l.state.Server != id {
		if l.state.Server != "" && cfg.From == "" {
			// A cursor is a position in one gateway's database.
			return fmt.Errorf("the state file %s follows %s, not %s: give another --state, or --from to start over", l.statePath, l.state.Server, id)
		}
		l.state = state{Server: id}
	}
	return l.run(ctx)
}

// start returns the first request's position and says where it starts.
func (l *listener) start() url.Values {
	from := l.cfg.From
	switch {
	case from == "now":
		l.out.notice("starting from now")
		return url.Values{"after": {"now"}}
	case cursorPattern.MatchString(from):
		l.out.notice("starting after cursor " + from)
		return url.Values{"after": {from}}
	case from != "":
		l.out.notice("starting from " + from)
		return url.Values{"since": {from}}
	case l.state.Cursor != "":
		l.out.notice("resuming after cursor " + l.state.Cursor + " (" + l.statePath + ")")
		return url.Values{"after": {l.state.Cursor}}
	}
	l.out.notice("starting from now (no state file yet: " + l.statePath + ")")
	return url.Values{"after": {"now"}}
}

func (l *listener) run(ctx context.Context) error {
	l.out.notice(fmt.Sprintf("following %s%s, forwarding to %s", serverID(l.server), l.filterText(), l.fwd.target))
	from := l.start()
	// The first request answers at once, so the state file holds a
	// concrete position (a start "now" is fixed) and the backlog is said
	// before any wait.
	first, count, lastBehind := true, true, time.Time{}
	var down time.Time
	backoff := retryMin
	for ctx.Err() == nil {
		page, err := l.stream.fetch(ctx, from, count, first)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case refused(err):
				return err
			}
			if down.IsZero() {
				down = time.Now()
				l.out.notice(fmt.Sprintf("the gateway is unreachable (%v); retrying", err))
			}
			count = true // say how far behind once it answers again
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, l.cfg.RetryMax)
			continue
		}
		if !down.IsZero() {
			l.out.notice(fmt.Sprintf("the gateway answers again after %s", time.Since(down).Round(time.Millisecond)))
			down, backoff = time.Time{}, retryMin
		}
		if page.Behind != nil {
			l.sayBehind(page)
			lastBehind = time.Now()
		}
		l.fwd.signings = page.Sources
		for _, ev := range page.Events {
			if err := l.deliver(ctx, ev); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		l.state.Cursor, l.state.Inflight = page.Next, nil
		if err := l.save(); err != nil {
			return err
		}
		from, first = url.Values{"after": {page.Next}}, false
		count = page.More && time.Since(lastBehind) >= behindEvery
	}
	return nil
}

// sayBehind tells how many events wait after a page that counted them.
func (l *listener) sayBehind(page admin.StreamJSON) {
	n := *page.Behind + len(page.Events)
	if n == 0 {
		l.out.notice("up to date; waiting for events")
		return
	}
	more := ""
	if page.BehindAtLeast {
		more = "+"
	}
	oldest := ""
	if len(page.Events) > 0 {
		oldest = fmt.Sprintf(" (oldest recorded %s ago)", time.Since(page.Events[0].ReceivedAt).Round(time.Second))
	}
	l.out.behind(fmt.Sprintf("%d%s events to forward%s", n, more, oldest), n, page.BehindAtLeast)
}

// deliver forwards ev until the local app settles it (see
// outcome.settled), then records its cursor. It returns ctx's error
// when ctx ends between tries, and an error when ev cannot be forwarded
// at all (re-signing).
func (l *listener) deliver(ctx context.Context, ev admin.StreamEventJSON) error {
	calls := 0
	if l.state.Inflight != nil && l.state.Inflight.Cursor == ev.Cursor {
		calls = l.state.Inflight.Calls // calls made before a crash
	}
	var down time.Time
	backoff := retryMin
	for {
		calls++
		l.state.Inflight = &inflight{Cursor: ev.Cursor, Calls: calls}
		if err := l.save(); err != nil {
			return err
		}
		at := time.Now()
		o, err := l.fwd.call(ctx, ev, calls)
		if err != nil {
			return err
		}
		if o.settled() {
			l.state.Cursor, l.state.Inflight = ev.Cursor, nil
			if err := l.save(); err != nil {
				return err
			}
			l.out.event(ev, o, calls, at)
			if !down.IsZero() {
				l.out.notice(fmt.Sprintf("%s answers again after %s", l.fwd.target, time.Since(down).Round(time.Millisecond)))
			}
			return nil
		}
		if down.IsZero() {
			down = time.Now()
			l.out.notice(fmt.Sprintf("%s: %s for %s %s; retrying until it answers (Ctrl-C stops; the next run resumes here)",
				l.fwd.target, o, ev.Source, ev.EventID))
		}
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, l.cfg.RetryMax)
	}
}

func (l *listener) save() error {
	l.state.UpdatedAt = time.Now().UTC()
	return saveState(l.statePath, l.state)
}

func (l *listener) filterText() string {
	s := ""
	if l.cfg.Source != "" {
		s += " source " + l.cfg.Source
	}
	if l.cfg.Type != "" {
		s += " type " + l.cfg.Type
	}
	if s != "" {
		s = " (" + s[1:] + ")"
	}
	return s
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
