package jobs_test

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/logtest"
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
				dest:   jobs.Destination{URL: url, MaxAttempts: 1},
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
