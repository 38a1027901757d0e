package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

// TestStoredHeadersLeaveOutCredentials: credential-bearing headers are
// not stored with the event, signature headers are stored masked (their
// length only, the source's own signature header too when its name does
// not say so), and the sender's other headers are stored as sent.
func TestStoredHeadersLeaveOutCredentials(t *testing.T) {
	t.Parallel()
	acme := verify.Config{Scheme: verify.SchemeHMACSHA256, Secrets: []string{"acme-secret"}, Header: "X-Acme-Sig"}
	p := pipelinetest.Start(t, pipelinetest.Options{NoWorker: true, Sources: []pipelinetest.SourceSpec{
		{Name: "stripe", Verify: p0Verify},
		{Name: "acme", Verify: acme, EventID: "json:id"},
	}})
	credentials := map[string]string{
		"Authorization":                   "Bearer cred-authorization",
		"Proxy-Authorization":             "Basic cred-proxy",
		"Cookie":                          "session=cred-cookie",
		"X-Api-Key":                       "cred-api-key",
		"Api-Key":                         "cred-api-key-2",
		"X-Auth-Token":                    "cred-auth-token",
		"X-Gitlab-Token":                  "cred-gitlab",
		"X-Telegram-Bot-Api-Secret-Token": "cred-telegram",
		"Ocp-Apim-Subscription-Key":       "cred-azure",
		"X-Csrf-Token":                    "cred-csrf",
		// Issue 23, L2: stored before.
		"Authentication":          "cred-authentication",
		"X-Functions-Key":         "cred-functions",
		"X-Api_key":               "cred-api-underscore",
		"X-Webhook-Key":           "cred-webhook-key",
		"X-Plaid-Verification":    "cred-plaid-jwt",
		"Webhook-Auth":            "cred-webhook-auth",
		"X-Forwarded-Client-Cert": "cred-client-cert",
	}
	kept := map[string]string{
		"X-Sender-Trace":             "trace-1",
		"User-Agent":                 "Stripe/1.0",
		"I-Twilio-Idempotency-Token": "idem-1", // an id, not a credential
		"Idempotency-Key":            "idem-2", // GitLab's event id
		"X-Author":                   "someone",
		"X-Keyword":                  "word",
	}
	send := func(source string, cfg verify.Config, id string) map[string][]string {
		t.Helper()
		body := []byte(`{"id":"` + id + `"}`)
		h, _, err := verify.Sign(cfg, body, time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range credentials {
			h.Set(k, v)
		}
		for k, v := range kept {
			h.Set(k, v)
		}
		if code, answer := p.Post(t, "/webhooks/"+source, h, body); code != http.StatusAccepted {
			t.Fatalf("%s: got %d %s", source, code, answer)
		}
		var raw string
		if err := p.Schema.Pool.QueryRow(context.Background(), `SELECT headers::text FROM events WHERE external_id = $1`, id).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		for _, v := range credentials {
			if strings.Contains(raw, v) {
				t.Errorf("%s: credential %q stored: %s", source, v, raw)
			}
		}
		var stored map[string][]string
		if err := json.Unmarshal([]byte(raw), &stored); err != nil {
			t.Fatal(err)
		}
		for k, v := range kept {
			if got := stored[k]; len(got) != 1 || got[0] != v {
				t.Errorf("%s: header %s stored as %q, want %q", source, k, got, v)
			}
		}
		for k, v := range h {
			if got, ok := stored[k]; strings.Contains(strings.ToLower(k), "sig") && (!ok || got[0] != fmt.Sprintf("[masked: %d bytes]", len(v[0]))) {
				t.Errorf("%s: signature header %s stored as %q, want it masked", source, k, got)
			}
		}
		return stored
	}
	if stored := send("stripe", p0Verify, "evt_creds_stripe"); len(stored["Stripe-Signature"]) != 1 {
		t.Errorf("Stripe-Signature not stored masked: %v", stored)
	}
	if stored := send("acme", acme, "evt_creds_acme"); len(stored["X-Acme-Sig"]) != 1 {
		t.Errorf("the source's own signature header not stored masked: %v", stored)
	}
}

var p0Verify = verify.Config{Scheme: "stripe", Secrets: []string{pipelinetest.Secret}}

// TestStoredHeadersAreBounded: a small event cannot bring many headers
// to store: past 16 KiB or 100 values of them (credentials not counted)
// it is refused with 431 and nothing is stored; and the server reads at
// most 64 KiB of request line and headers.
func TestStoredHeadersAreBounded(t *testing.T) {
	t.Parallel()
	p := pipelinetest.Start(t, pipelinetest.Options{NoWorker: true})
	body := []byte(`{"id":"evt_many_headers"}`)
	for name, add := range map[string]func(http.Header){
		"150 small headers": func(h http.Header) {
			for i := range 150 {
				h.Set(fmt.Sprintf("X-H-%03d", i), "v")
			}
		},
		"one 20 KiB header":   func(h http.Header) { h.Set("X-Big", strings.Repeat("b", 20<<10)) },
		"20 KiB over 20 ones": func(h http.Header) { addPadding(h, 20, 1024) },
	} {
		h := signed(body)
		add(h)
		if code, answer := p.Post(t, "/webhooks/stripe", h, body); code != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: %d %s, want 431", name, code, answer)
		}
	}
	// Credentials are dropped before counting: a big cookie is no reason
	// to refuse an event.
	h := signed(body)
	h.Set("Cookie", strings.Repeat("c", 20<<10))
	if code, answer := p.Post(t, "/webhooks/stripe", h, body); code != http.StatusAccepted {
		t.Errorf("with a 20 KiB cookie: %d %s, want 202", code, answer)
	}
	if n := p.Schema.Int(t, `SELECT count(*) FROM events`); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}

	// The process's server refuses a megabyte of headers before any
	// handler runs.
	srv := gateway.New(gateway.Config{Registry: prometheus.NewRegistry()}, nil, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/healthz", nil)
	req.Header.Set("X-Request-Id", strings.Repeat("r", 1<<20))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("1 MiB of headers: %d, want 431", resp.StatusCode)
	}
}

func addPadding(h http.Header, n, size int) {
	for j := range n {
		h.Set(fmt.Sprintf("X-Pad-%02d", j), strings.Repeat("p", size))
	}
}
