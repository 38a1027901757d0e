package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// nestedSources are the sources whose scheme or id reads JSON before or
// right after the signature check (issue 23, H1): each handshake check,
// each verifier that reads the body, and a json: id on an unsigned
// source.
const nestedSources = `
  - name: none
    verify: {scheme: none, allow_unsigned: true}
    event_id: json:id
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: slack
    verify: {scheme: slack, secrets: [slack-signing-secret]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: zoom
    verify: {scheme: zoom, secrets: [zoom-secret-token]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: discord
    verify: {scheme: discord, secrets: [d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: mailgun
    verify: {scheme: mailgun, secrets: [mg-signing-key]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: adyen
    verify: {scheme: adyen, secrets: [44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: msgraph
    verify: {scheme: msgraph, secrets: [graph-client-state]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
`

// TestNestedJSONBoundsMemory: bodies of '[' only, sent to every source
// that reads JSON before or right after its signature check, are refused
// quickly with a 4xx, record nothing, and leave the process's peak RSS
// bounded; at addef08 each grew one goroutine's stack to ~256 MiB (16
// such requests took a process to 2.1 GB) and an 8 MiB body ended the
// process with a stack overflow.
func TestNestedJSONBoundsMemory(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	config := proctest.WriteConfig(t, fmt.Sprintf(`database_url: %q
redis_url: %q
queue: %q
max_body_bytes: 16777216
sources:%s`, schema.URL, rdb.URL, rdb.Queue, nestedSources))
	p := proctest.StartWebhookd(t, "gateway", bin, "gateway", config)

	client := &http.Client{Timeout: 30 * time.Second}
	post := func(source string, body []byte) (int, time.Duration) {
		t.Helper()
		start := time.Now()
		resp, err := client.Post(p.URL()+"/webhooks/"+source, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST /webhooks/%s (%d bytes): no answer, the process may have died: %v\n%s", source, len(body), err, p.Logs())
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}

	const limit = 200 << 20
	before := p.PeakRSS()
	mib := bytes.Repeat([]byte("["), 1<<20)
	for _, source := range []string{"none", "slack", "zoom", "discord", "mailgun", "adyen", "msgraph"} {
		var slowest time.Duration
		for range 16 {
			code, took := post(source, mib)
			if code < 400 || code >= 500 {
				t.Fatalf("%s: 1 MiB of '[' answered %d, want a 4xx", source, code)
			}
			slowest = max(slowest, took)
		}
		t.Logf("%s: 16 × 1 MiB of '[' refused, slowest answer %s", source, slowest)
	}
	// One 8 MiB body: at addef08 it overflowed the stack and killed the
	// process.
	if code, _ := post("none", bytes.Repeat([]byte("["), 8<<20)); code != http.StatusBadRequest {
		t.Errorf("none: 8 MiB of '[' answered %d, want 400", code)
	}
	if code, _ := post("none", []byte(`{"id":"evt_after_the_flood"}`)); code != http.StatusAccepted {
		t.Errorf("an ordinary event after the flood answered %d, want 202", code)
	}
	peak := p.PeakRSS()
	t.Logf("peak RSS %d MiB before the bodies, %d MiB after", before>>20, peak>>20)
	if peak > limit {
		t.Errorf("peak RSS %d MiB after the nested bodies, want under %d MiB", peak>>20, limit>>20)
	}
	var n int
	if err := schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d events recorded, want only the ordinary one", n)
	}
}
