package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/sink"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/jobs"
)

// cliToken is the admin token of the operator commands' tests, and
// cliReadOnlyToken a read-only one.
const (
	cliToken         = "cli-admin-token-0123456789"
	cliReadOnlyToken = "cli-read-only-token-0123456789"
)

// operatorCommand runs the webhookd binary's operator command args
// against server with token in $WEBHOOKD_ADMIN_TOKEN, and neither a
// database nor a Redis URL in its environment: it has only the API.
func operatorCommand(bin, server, token string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append(args, "--server", server)...)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=", "WEBHOOKD_LISTEN=", "WEBHOOKD_ADMIN_TOKEN="+token)
	return cmd
}

// TestOperatorCommandsOverTheAdminAPI: events, replay and destinations talk
// to a running gateway with the token from the environment, print the
// API's JSON with --json and a table otherwise, refuse flags that do not
// apply, and say clearly what a 401, 404 or a refused connection means.
func TestOperatorCommandsOverTheAdminAPI(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	dest := sink.New(nil)
	ds := httptest.NewServer(dest)
	t.Cleanup(ds.Close)
	p := pipelinetest.Start(t, pipelinetest.Options{Destinations: map[string]string{"sink": ds.URL}, AdminTokens: []string{cliToken},
		AdminReadOnlyTokens: []string{cliReadOnlyToken}})
	for _, id := range []string{"evt_cli_1", "evt_cli_2"} {
		if code, body := p.Send(t, []byte(`{"id":"`+id+`","type":"invoice.paid"}`)); code != 202 {
			t.Fatalf("send %s: %d %s", id, code, body)
		}
	}
	pipelinetest.Eventually(t, 20*time.Second, "both delivered", func() bool { return dest.Stats().Calls == 2 })
	if _, err := p.Schema.Pool.Exec(t.Context(), `UPDATE events SET event_type = 'invoice.paid'`); err != nil {
		t.Fatal(err)
	}
	run := func(token string, args ...string) (string, error) {
		t.Helper()
		out, err := operatorCommand(bin, p.URL, token, args...).CombinedOutput()
		return string(out), err
	}
	ok := func(args ...string) string {
		t.Helper()
		out, err := run(cliToken, args...)
		if err != nil {
			t.Fatalf("webhookd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(token, want string, args ...string) {
		t.Helper()
		out, err := run(token, args...)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("webhookd %s: %v\n%s\nwant an error saying %q", strings.Join(args, " "), err, out, want)
		}
	}

	if out := ok("events", "list"); !strings.Contains(out, "evt_cli_1") || !strings.Contains(out, "evt_cli_2") ||
		!strings.Contains(out, "TYPE") || !strings.Contains(out, "invoice.paid") || !strings.Contains(out, "2 events match") {
		t.Errorf("events list:\n%s", out)
	}
	var list admin.EventListJSON
	if err := json.Unmarshal([]byte(ok("events", "list", "--json")), &list); err != nil || len(list.Events) != 2 {
		t.Errorf("events list --json: %v %+v", err, list)
	}
	if out := ok("events", "list", "--q", "evt_cli_1", "--type", "invoice.*", "--status", "done", "--destination", "sink"); !strings.Contains(out, "evt_cli_1") || strings.Contains(out, "evt_cli_2") {
		t.Errorf("events list --q evt_cli_1:\n%s", out)
	}
	if out := ok("events", "list", "--type", "charge.*"); strings.Contains(out, "evt_cli") {
		t.Errorf("events list --type charge.*:\n%s", out)
	}
	fails(cliToken, "unknown run status", "events", "list", "--status", "bogus")
	// What the operator mistyped exits 2 (a cron job must not pass on a
	// typo) and names what was meant.
	for _, c := range []struct {
		want string
		args []string
	}{
		{`unknown source "nope"`, []string{"events", "list", "--source", "nope"}},
		{`unknown destination "snk" (did you mean sink?)`, []string{"events", "list", "--destination", "snk"}},
		{`"2x" is neither a time`, []string{"events", "list", "--since", "2x"}},
		{`unknown command "search" for "webhookd events"`, []string{"events", "search", "x"}},
		{`unknown command "lst" for "webhookd destinations" (did you mean list or test?)`, []string{"destinations", "lst"}},
		{"unknown flag: --bogus", []string{"events", "list", "--bogus"}},
	} {
		out, err := run(cliToken, c.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, c.want) {
			t.Errorf("webhookd %s: %v\n%s\nwant exit 2 saying %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
	check := exec.Command(bin, "check", "dupes")
	if out, err := check.CombinedOutput(); check.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), `unknown command "dupes" for "webhookd check" (did you mean duplicates?)`) {
		t.Errorf("webhookd check dupes: %v\n%s\nwant exit 2 naming duplicates", err, out)
	}
	if out := ok("events", "list", "--since", "2d"); !strings.Contains(out, "evt_cli_1") {
		t.Errorf("events list --since 2d:\n%s", out)
	}
	var detail admin.EventDetailJSON
	if err := json.Unmarshal([]byte(ok("events", "show", "stripe", "evt_cli_1", "--json")), &detail); err != nil ||
		detail.EventID != "evt_cli_1" || len(detail.Runs) != 1 || detail.Runs[0].Status != dedupe.StatusDone {
		t.Errorf("events show --json: %v %+v", err, detail)
	}
	if out := ok("events", "show", "stripe", "evt_cli_1"); !strings.Contains(out, "state       done") {
		t.Errorf("events show:\n%s", out)
	}

	// Flags that do not apply are errors, and nothing is replayed.
	runs := p.Schema.Int(t, `SELECT count(*) FROM job_runs`)
	fails(cliToken, "--dry-run applies to a bulk replay", "replay", "stripe", "evt_cli_1", "--force", "--dry-run", "--destination", "sink", "--reason", "x")
	fails(cliToken, "--state applies to a bulk replay", "replay", "stripe", "evt_cli_1", "--state", "done")
	fails(cliToken, "--destination NAME or --all-destinations", "replay", "stripe", "evt_cli_1", "--force", "--reason", "x")
	fails(cliToken, "--force needs --reason", "replay", "stripe", "evt_cli_1", "--force", "--destination", "sink")
	fails(cliToken, "--all-destinations applies only with --force", "replay", "stripe", "evt_cli_1", "--all-destinations")
	fails(cliToken, "--destination NAME or --all-destinations", "replay", "--source", "stripe", "--force", "--reason", "x", "--dry-run=false")
	fails(cliToken, "--skip needs --reason", "replay", "stripe", "evt_cli_1", "--skip", "--destination", "sink")
	fails(cliToken, "only those can be skipped", "replay", "stripe", "evt_cli_1", "--skip", "--destination", "sink", "--reason", "x")
	if out := ok("events", "held"); !strings.Contains(out, "no entity is waiting for order") {
		t.Errorf("events held:\n%s", out)
	}

	// A request with no signature is refused and kept (off the request
	// path, so it is waited for): rejected list shows it, --json is the
	// API's list.
	resp, err := http.Post(p.URL+"/webhooks/stripe", "application/json", strings.NewReader(`{"id":"evt_forged","type":"invoice.paid"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unsigned request: %d, want 401", resp.StatusCode)
	}
	pipelinetest.Eventually(t, 10*time.Second, "the unsigned request listed", func() bool {
		out := ok("rejected", "list", "--source", "stripe")
		return strings.Contains(out, "stripe") && strings.Contains(out, " 401 ")
	})
	var rejected admin.RejectedListJSON
	if err := json.Unmarshal([]byte(ok("rejected", "list", "--json")), &rejected); err != nil || len(rejected.Rejected) != 1 ||
		rejected.Rejected[0].Source != "stripe" || rejected.Rejected[0].Status != http.StatusUnauthorized {
		t.Errorf("rejected list --json: %v, %+v", err, rejected)
	}
	if got := p.Schema.Int(t, `SELECT count(*) FROM job_runs`); got != runs || dest.Stats().Calls != 2 {
		t.Fatalf("refused replays changed something: %d runs (was %d), %d calls", got, runs, dest.Stats().Calls)
	}

	if out := ok("replay", "stripe", "evt_cli_1"); !strings.Contains(out, jobs.ActionStoredResult) {
		t.Errorf("replay of a done event:\n%s", out)
	}
	if out := ok("replay", "stripe", "evt_cli_1", "--force", "--destination", "sink", "--reason", "customer asked"); !strings.Contains(out, "stripe:sink:evt_cli_1#2") {
		t.Errorf("forced replay:\n%s", out)
	}
	pipelinetest.Eventually(t, 20*time.Second, "the #2 call", func() bool { return dest.Count("stripe:sink:evt_cli_1#2") == 1 })
	if out := ok("replay", "--source", "stripe"); !strings.Contains(out, "dry run: 2 events match") {
		t.Errorf("bulk dry run:\n%s", out)
	}

	if out := ok("destinations", "pause", "stripe", "sink", "--reason", "owner's incident"); !strings.Contains(out, "stripe/sink is paused") {
		t.Errorf("pause:\n%s", out)
	}
	if out := ok("destinations", "list"); !strings.Contains(out, "paused") || !strings.Contains(out, "owner's incident") {
		t.Errorf("destinations list:\n%s", out)
	}
	if out := ok("destinations", "resume", "stripe", "sink"); !strings.Contains(out, "stripe/sink is active") {
		t.Errorf("resume:\n%s", out)
	}
	calls := dest.Stats().Calls
	if out := ok("destinations", "test", "stripe", "sink"); !strings.Contains(out, "delivered, HTTP 200") || !strings.Contains(out, "(key stripe:sink:webhookd_test_") {
		t.Errorf("destinations test:\n%s", out)
	}
	if got := dest.Stats().Calls; got != calls+1 || p.Schema.Int(t, `SELECT count(*) FROM events WHERE external_id LIKE 'webhookd_test_%'`) != 0 {
		t.Errorf("destinations test: %d calls (was %d), or it was recorded as an event", got, calls)
	}

	fails("", "set $WEBHOOKD_ADMIN_TOKEN", "events", "list")
	fails("wrong-token-0123456789", "refused the admin token in $WEBHOOKD_ADMIN_TOKEN", "events", "list")
	fails(cliToken, "404", "events", "show", "stripe", "evt_nope")
	if out, err := run(cliReadOnlyToken, "events", "list"); err != nil || !strings.Contains(out, "evt_cli_1") {
		t.Errorf("events list with a read-only token: %v\n%s", err, out)
	}
	fails(cliReadOnlyToken, "refused this (403: read-only admin token", "replay", "stripe", "evt_cli_2")
	fails(cliReadOnlyToken, "the token is $WEBHOOKD_ADMIN_TOKEN", "destinations", "pause", "stripe", "sink")
	fails(cliReadOnlyToken, "the token is $WEBHOOKD_ADMIN_TOKEN", "destinations", "test", "stripe", "sink")
	// Without --server, the config's listen names the gateway (on
	// loopback when it names every interface); no config at all means
	// 127.0.0.1:8080.
	_, port, _ := strings.Cut(strings.TrimPrefix(p.URL, "http://"), ":")
	cfg := proctest.WriteConfig(t, fmt.Sprintf("listen: \":%s\"\ndatabase_url: postgres://nowhere.invalid/db\nsources:\n  - name: stripe\n    verify: {scheme: none, allow_unsigned: true}\n    event_id: json:id\n    destinations:\n      - {name: sink, url: http://127.0.0.1:9/}\n", port))
	byConfig := exec.Command(bin, "events", "list", "--config", cfg)
	byConfig.Env = append(os.Environ(), "DATABASE_URL=", "REDIS_URL=", "WEBHOOKD_LISTEN=", "WEBHOOKD_ADMIN_TOKEN="+cliToken)
	if out, err := byConfig.CombinedOutput(); err != nil || !strings.Contains(string(out), "evt_cli_1") {
		t.Errorf("events list with the server from the config's listen: %v\n%s", err, out)
	}
	noConfig := exec.Command(bin, "events", "list")
	noConfig.Dir = t.TempDir()
	noConfig.Env = byConfig.Env
	if out, err := noConfig.CombinedOutput(); !strings.Contains(string(out), "http://127.0.0.1:8080") {
		t.Errorf("events list without a config: %v\n%s, want it to call http://127.0.0.1:8080", err, out)
	}
	out, err := operatorCommand(bin, "http://127.0.0.1:1", cliToken, "events", "list").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection refused") || !strings.Contains(string(out), "--server") {
		t.Errorf("events list with nothing listening: %v\n%s", err, out)
	}
}
