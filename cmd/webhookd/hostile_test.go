package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
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

// TestUnsignedIDCopiesAreDuplicates: the senders that sign no event id
// (issue 23, M1–M3), through a real gateway with each scheme's default
// configuration. A Mailgun signature object attached to forged
// event-data, an Adyen notification with other whitespace or another
// unsigned field, and a Razorpay or Linear body under a fresh id header
// are answered as duplicates of the first event and record nothing; an
// Adyen amount or key that a receiver would read otherwise than signed is
// refused. Before, each forgery and copy was a new event.
func TestUnsignedIDCopiesAreDuplicates(t *testing.T) {
	t.Parallel()
	const (
		mailgunKey = "mg-signing-key"
		adyenKey   = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
		razorKey   = "razorpay-webhook-secret"
		linearKey  = "linear-signing-secret"
	)
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	config := proctest.WriteConfig(t, fmt.Sprintf(`database_url: %q
redis_url: %q
queue: %q
sources:
  - name: mailgun
    verify: {scheme: mailgun, secrets: [%s]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: adyen
    verify: {scheme: adyen, secrets: [%s]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: razorpay
    verify: {scheme: razorpay, secrets: [%s]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
  - name: linear
    verify: {scheme: linear, secrets: [%s]}
    destinations: [{name: app, url: "http://127.0.0.1:9/app"}]
`, schema.URL, rdb.URL, rdb.Queue, mailgunKey, adyenKey, razorKey, linearKey))
	p := proctest.StartWebhookd(t, "gateway", bin, "gateway", config)

	type answer struct {
		code    int
		Status  string `json:"status"`
		EventID string `json:"event_id"`
	}
	post := func(source string, h http.Header, body []byte) answer {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, p.URL()+"/webhooks/"+source, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		a := answer{code: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&a)
		return a
	}
	first := func(what, source string, h http.Header, body []byte) string {
		t.Helper()
		a := post(source, h, body)
		if a.code != http.StatusAccepted {
			t.Fatalf("%s: answered %d, want 202", what, a.code)
		}
		return a.EventID
	}
	wantDuplicate := func(what, source string, h http.Header, body []byte, of string) {
		t.Helper()
		if a := post(source, h, body); a.code != http.StatusOK || a.Status != "duplicate" || a.EventID != of {
			t.Errorf("%s: answered %d %q of %q, want 200 duplicate of %q", what, a.code, a.Status, a.EventID, of)
		}
	}
	wantRefused := func(what, source string, body []byte) {
		t.Helper()
		if a := post(source, http.Header{}, body); a.code != http.StatusUnauthorized {
			t.Errorf("%s: answered %d, want 401", what, a.code)
		}
	}
	now := time.Now()

	// M1: Mailgun signs timestamp + token only.
	mg, err := verify.MailgunSignBody([]byte(`{"event-data":{"id":"mg-evt-1","event":"delivered","recipient":"a@example.com"}}`),
		mailgunKey, "token-of-one-delivery", now)
	if err != nil {
		t.Fatal(err)
	}
	mgID := first("mailgun", "mailgun", http.Header{}, mg)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(mg, &doc); err != nil {
		t.Fatal(err)
	}
	for i, forged := range []string{`{"id":"forged-1","event":"failed","recipient":"b@example.com"}`, `{"id":"forged-2","event":"complained"}`} {
		doc["event-data"] = json.RawMessage(forged)
		body, _ := json.Marshal(doc)
		wantDuplicate(fmt.Sprintf("mailgun: forged event-data %d under a captured signature", i+1), "mailgun", http.Header{}, body, mgID)
	}

	// M2: Adyen signs eight fields of each item and no timestamp.
	refund, err := verify.AdyenSignBody([]byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{`+
		`"pspReference":"PSP1","originalReference":"ORIG1","merchantAccountCode":"Acme","merchantReference":"order-7",`+
		`"amount":{"value":1000,"currency":"EUR"},"eventCode":"REFUND","success":"true","reason":"customer asked"}}]}`), adyenKey)
	if err != nil {
		t.Fatal(err)
	}
	// Adyen is answered "[accepted]" whatever happened (what it expects):
	// the database says whether a copy made a new event.
	adyenEvents := func() (n, deliveries int) {
		t.Helper()
		if err := schema.Pool.QueryRow(t.Context(), `SELECT count(*), COALESCE(sum(deliveries), 0) FROM event_deliveries WHERE source = 'adyen'`).
			Scan(&n, &deliveries); err != nil {
			t.Fatal(err)
		}
		return n, deliveries
	}
	// A copy of signed content is answered as its original's duplicate
	// and writes nothing (not even a delivery count).
	if a := post("adyen", http.Header{}, refund); a.code != http.StatusOK {
		t.Fatalf("adyen refund: answered %d, want 200 [accepted]", a.code)
	}
	for i, copied := range map[string][]byte{
		"the refund with added whitespace":       append([]byte(" \n"), refund...),
		"the refund with another unsigned field": bytes.Replace(refund, []byte(`"customer asked"`), []byte(`"again"`), 1),
	} {
		if a := post("adyen", http.Header{}, copied); a.code != http.StatusOK {
			t.Errorf("adyen: %s: answered %d, want 200 [accepted]", i, a.code)
		}
	}
	if n, deliveries := adyenEvents(); n != 1 || deliveries != 1 {
		t.Errorf("adyen: %d events with %d deliveries after the refund and two copies, want the refund alone, once", n, deliveries)
	}
	for what, alter := range map[string][2]string{
		"amount 1000.99":        {`"value":1000`, `"value":1000.99`},
		`amount "1000"`:         {`"value":1000`, `"value":"1000"`},
		"repeated pspReference": {`"pspReference":"PSP1"`, `"pspReference":"PSP1","pspReference":"PSP2"`},
	} {
		body := bytes.Replace(refund, []byte(alter[0]), []byte(alter[1]), 1)
		if bytes.Equal(body, refund) {
			t.Fatalf("adyen: %s: %s not in the signed body", what, alter[0])
		}
		wantRefused("adyen: "+what, "adyen", body)
	}

	// M3: Razorpay and Linear sign the body, not their id headers.
	razor := []byte(`{"entity":"event","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_1","amount":5000}}},"created_at":1767225600}`)
	h, _, err := verify.Sign(verify.Config{Scheme: verify.SchemeRazorpay, Secrets: []string{razorKey}}, razor, now, "evt_razor_1")
	if err != nil {
		t.Fatal(err)
	}
	razorID := first("razorpay", "razorpay", h, razor)
	for _, fresh := range []string{"evt_razor_2", "evt_razor_3"} {
		h.Set("X-Razorpay-Event-Id", fresh)
		wantDuplicate("razorpay: the body under "+fresh, "razorpay", h, razor, razorID)
	}
	linear := fmt.Appendf(nil, `{"action":"update","type":"Issue","data":{"id":"iss_1"},"webhookTimestamp":%d}`, now.UnixMilli())
	h, _, err = verify.Sign(verify.Config{Scheme: verify.SchemeLinear, Secrets: []string{linearKey}}, linear, now, "delivery-1")
	if err != nil {
		t.Fatal(err)
	}
	linearID := first("linear", "linear", h, linear)
	h.Set("Linear-Delivery", "delivery-2")
	wantDuplicate("linear: the body under a fresh Linear-Delivery", "linear", h, linear, linearID)

	var n int
	if err := schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d events recorded, want the 4 genuine ones", n)
	}
}
