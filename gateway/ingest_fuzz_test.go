package gateway_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

// FuzzIngestEdge sends a signed request whose event id, order fields,
// Content-Type, one more header and body are the fuzzer's, at the same
// time as a legitimate event (they share a group-commit statement), to a
// gateway recording into a real schema, and checks the ingest edge's
// promise: a request either gets a 2xx with its row committed, or a 4xx
// or 503 with nothing written, and never changes another request's
// answer (the legitimate event is always accepted and stored).
//
// Each input is two requests and a statement, so CI runs fewer:
// .ci/fuzz: -fuzztime=2000x -fuzzminimizetime=50x
func FuzzIngestEdge(f *testing.F) {
	schema := pgtest.New(f)
	batcher := dedupe.NewBatcher(schema.Pool, dedupe.BatcherConfig{Linger: 5 * time.Millisecond, LingerBelow: 2})
	f.Cleanup(batcher.Close)
	vcfg := verify.Config{Scheme: verify.SchemeHMACSHA256, Secrets: []string{"fuzz-secret"}}
	v, err := verify.New(vcfg)
	if err != nil {
		f.Fatal(err)
	}
	parse := func(spec string) *eventid.Extractor {
		e, err := eventid.Parse(spec)
		if err != nil {
			f.Fatal(err)
		}
		return &e
	}
	srv := gateway.New(gateway.Config{
		Sources: map[string]gateway.Source{"fuzz": {
			Scheme: vcfg.Scheme, Verifier: v, EventID: *parse("header:X-Event-Id"),
			OrderEntity: parse("header:X-Entity"), OrderVersion: parse("header:X-Version"),
			SignatureHeader: vcfg.WithDefaults().Header, ContentWindow: time.Hour,
		}},
		MaxBodyBytes: 4 << 10,
		Registry:     prometheus.NewRegistry(),
		Logger:       slog.New(slog.DiscardHandler),
	}, batcher, nil)

	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	controlPrefix := "ctl-" + hex.EncodeToString(nonce[:]) + "-"
	var controls atomic.Int64
	post := func(id, contentType, name, value, entity, version string, body []byte) (int, map[string]any) {
		h, _, err := verify.Sign(vcfg, body, time.Now(), "")
		if err != nil {
			panic(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/fuzz", bytes.NewReader(body))
		for k, vs := range h {
			req.Header[k] = vs
		}
		// Set straight into the map: the server's own checks are under
		// test, not the client's.
		for k, v := range map[string]string{"Content-Type": contentType, "X-Event-Id": id, "X-Entity": entity, "X-Version": version} {
			if v != "" {
				req.Header[k] = []string{v}
			}
		}
		if name != "" {
			req.Header[name] = append(req.Header[name], value)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var answer map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &answer)
		return rec.Code, answer
	}

	f.Add("evt_1", "application/json", "X-Trace", "abc", "", "", []byte(`{"id":1}`))
	f.Add("evt_2", "application/json\xff", "", "", "", "", []byte(`{}`))
	f.Add("evt\x003", "text/plain", "X-Nul", "a\x00b", "e", "1", []byte("x"))
	f.Add("X#2", "application/json; charset=utf-8", "Cookie", "s=1", "cus_1", "2024-01-01T00:00:00Z", []byte(`{"a":"\u00e9"}`))
	f.Add("evt_\xc3\x28", "", "X-Bad\xff", "\xff\xfe", "ent\x01", "v\xff", []byte{0xff, 0x00})
	f.Add("", "application/json", "", "", "", "", []byte(`{"id":"no header id"}`))
	f.Fuzz(func(t *testing.T, id, contentType, name, value, entity, version string, body []byte) {
		start := time.Now()
		control := fmt.Sprintf("%s%d", controlPrefix, controls.Add(1))
		var (
			wg               sync.WaitGroup
			code, ctlCode    int
			answer, ctlReply map[string]any
		)
		wg.Go(func() { code, answer = post(id, contentType, name, value, entity, version, body) })
		wg.Go(func() {
			ctlCode, ctlReply = post(control, "application/json", "", "", "", "", []byte(`{"control":"`+control+`"}`))
		})
		wg.Wait()

		if ctlCode != http.StatusAccepted || ctlReply["event_id"] != control {
			t.Fatalf("the legitimate event sent with it got %d %v, want 202 accepted", ctlCode, ctlReply)
		}
		written := schema.Int(t, `SELECT count(*) FROM events WHERE received_at >= $1`, start)
		got, _ := answer["event_id"].(string)
		switch {
		case code == http.StatusAccepted:
			if written != 2 || schema.Int(t, `SELECT count(*) FROM event_deliveries WHERE source = 'fuzz' AND external_id = $1 AND deliveries = 1`, got) != 1 {
				t.Fatalf("202 %v, but %d rows written (want 2) or its row is not there", answer, written)
			}
		case code == http.StatusOK:
			if written != 1 || schema.Int(t, `SELECT count(*) FROM events WHERE source = 'fuzz' AND external_id = $1`, got) != 1 {
				t.Fatalf("200 %v, but %d rows written (want the control's only) or the event it names is not there", answer, written)
			}
		case code >= 400 && code < 500 || code == http.StatusServiceUnavailable:
			if written != 1 {
				t.Fatalf("%d %v, but %d rows written, want the control's only", code, answer, written)
			}
		default:
			t.Fatalf("answered %d %v", code, answer)
		}
	})
}
