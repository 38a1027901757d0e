package jobs_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/logtest"
	"github.com/webhookd/webhookd/jobs"
)

// TestDestinationCredentialsAreRedacted: a destination URL's userinfo and
// query values are credentials; a failed call must not put them in the
// run's last_error, the call log, the log lines or Asynq's archived task.
// net/http's error masks only the password, so the user and the query
// used to be recorded whenever the URL had a password.
func TestDestinationCredentialsAreRedacted(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: every call is a connection error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	secrets := []string{"alice", "pa55word", "t0ken", "s1g", "bareT0ken", "fr4g", "ali%63e", "pa55%77ord", "t0%6Ben"}
	for name, url := range map[string]string{
		"user and password":   "http://alice:pa55word@" + addr + "/hooks/in?token=t0ken&sig=s1g#fr4g",
		"user only":           "http://alice@" + addr + "/hooks/in?bareT0ken",
		"query only":          "http://" + addr + "/hooks/in?token=t0ken",
		"password, no query":  "http://alice:pa55word@" + addr + "/hooks/in",
		"encoded credentials": "http://ali%63e:pa55%77ord@" + addr + "/hooks/in?token=t0%6Ben",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			logs := &logtest.Buffer{}
			b := setup(t, handlerOptions{
				dest:   jobs.DestinationSpec{URL: url, MaxAttempts: 1},
				logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			q := b.startWorker(t)
			b.record(t, "evt_1", body)
			p := jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"}
			if err := q.enqueuer.Enqueue(testCtx(t), p); err != nil {
				t.Fatal(err)
			}
			waitArchived(t, q, p.Key())
			r := b.run(t, p.Key())
			if r.Status != dedupe.StatusDead || r.LastError == nil {
				t.Fatalf("run %+v, want dead with a last error", r)
			}
			info, err := q.insp.GetTaskInfo(q.redis.Queue, p.Key())
			if err != nil {
				t.Fatal(err)
			}
			var callErr string
			if err := b.schema.Pool.QueryRow(testCtx(t), `SELECT error FROM delivery_attempts WHERE key = $1`, p.Key()).Scan(&callErr); err != nil {
				t.Fatal(err)
			}
			recorded := map[string]string{
				"last_error": *r.LastError, "call log": callErr, "archived task": info.LastErr, "logs": logs.String(),
			}
			for where, text := range recorded {
				for _, s := range secrets {
					if strings.Contains(text, s) || strings.Contains(text, strings.ToUpper(s)) {
						t.Errorf("%s holds %q: %s", where, s, text)
					}
				}
			}
			t.Logf("last_error: %s", *r.LastError)
			if !strings.Contains(*r.LastError, "connection") || !strings.Contains(*r.LastError, "/hooks/in") {
				t.Errorf("last_error %q should still say what failed and where", *r.LastError)
			}
		})
	}
}

// TestDestinationRedirectsAreNotFollowed: the payload, its signature and
// its key go to the configured URL only. Followed, a 302 turned the POST
// into a body-less GET that was marked done, and a 307 sent the body,
// signature and Idempotency-Key to another host. A 3xx is a failed
// attempt (retried with backoff) whose status and Location are kept.
func TestDestinationRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			elsewhere := newDestination(t, status(http.StatusOK))
			location := elsewhere.URL + "/stolen?token=l0cT0ken"
			d := newDestination(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
				w.Header().Set("Location", location)
				w.WriteHeader(code)
			})
			b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 3, SigningSecret: "whsec_c2VjcmV0"}})
			b.record(t, "evt_1", body)
			err := b.handler.Deliver(testCtx(t), jobs.DeliverPayload{Source: "src", EventID: "evt_1", Destination: "dst"})

			var re *jobs.RetryError
			if !errors.As(err, &re) || re.Hold {
				t.Fatalf("Deliver: %v, want a failed attempt to retry", err)
			}
			if n := len(elsewhere.Calls()); n != 0 {
				t.Fatalf("the redirect target got %d calls: %+v", n, elsewhere.Calls())
			}
			if n := len(d.Calls()); n != 1 {
				t.Fatalf("destination got %d calls, want 1", n)
			}
			r := b.run(t, "src:dst:evt_1")
			if r.Status != dedupe.StatusFailed || r.Attempts != 1 || r.Permanent || r.LastError == nil {
				t.Fatalf("run %+v, want failed (to be retried) after 1 attempt", r)
			}
			want := fmt.Sprintf("HTTP %d to %s/stolen?token=redacted", code, elsewhere.URL)
			if !strings.Contains(*r.LastError, want) || strings.Contains(*r.LastError, "l0cT0ken") {
				t.Fatalf("last_error %q, want it to hold %q and not the token", *r.LastError, want)
			}
			var callCode int
			if err := b.schema.Pool.QueryRow(testCtx(t), `SELECT status_code FROM delivery_attempts WHERE key = 'src:dst:evt_1'`).Scan(&callCode); err != nil || callCode != code {
				t.Fatalf("call log status %d (%v), want %d", callCode, err, code)
			}
		})
	}
}
