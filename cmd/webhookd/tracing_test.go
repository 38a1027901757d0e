package main

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
	"github.com/webhookd/webhookd/internal/tracing"
)

// receivedSpan is one span an OTLP receiver got, with the process that
// sent it (its resource's webhookd.process attribute).
type receivedSpan struct {
	process             string
	name                string
	traceID, id, parent string
	links               []string // span ids
}

// otlpReceiver is an OTLP/HTTP trace endpoint (POST /v1/traces, binary
// protobuf, as OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf sends it) that
// keeps every span.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []receivedSpan
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s (%s), want POST /v1/traces of application/x-protobuf", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &export)
		}
		if err != nil {
			t.Errorf("OTLP receiver: undecodable export: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&export)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) add(export *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.GetResourceSpans() {
		process := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "webhookd.process" {
				process = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, receivedSpan{
					process: process, name: s.GetName(),
					traceID: hex.EncodeToString(s.GetTraceId()), id: hex.EncodeToString(s.GetSpanId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), links: linkIDs(s.GetLinks()),
				})
			}
		}
	}
}

func linkIDs(links []*tracepb.Span_Link) []string {
	var ids []string
	for _, l := range links {
		ids = append(ids, hex.EncodeToString(l.GetSpanId()))
	}
	return ids
}

// all returns every span received so far.
func (r *otlpReceiver) all() []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedSpan(nil), r.spans...)
}

// ofTrace returns the spans of traceID received so far.
func (r *otlpReceiver) ofTrace(traceID string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// TestTraceAcrossProcesses: a gateway and a worker process export to a
// real OTLP/HTTP receiver. One event, sent with a sender's traceparent,
// whose destination fails the first call, is one connected trace across
// both processes: the gateway's request, record and hand-off, the
// worker's two deliveries (the retry linked to the request), each with
// its claim and destination call; and the destination received, on each
// call, a traceparent naming that call's span of this trace.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	receiver := newOTLPReceiver(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("spans received: %+v", receiver.all())
		}
	})
	dest := newFaultSink(t)
	var (
		mu           sync.Mutex
		traceparents []string
	)
	dest.hook = func(key string, n int, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return true
		}
		return false
	}
	cfg := proctest.WriteConfig(t, faultConfig(schema.URL, rdb.URL, rdb.Queue, dest.URL))
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + receiver.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
	gw := proctest.StartWebhookd(t, "gateway", bin, "gateway", cfg, append(otel, "OTEL_RESOURCE_ATTRIBUTES=webhookd.process=gateway")...)
	proctest.StartWebhookd(t, "worker", bin, "worker", cfg, append(otel, "OTEL_RESOURCE_ATTRIBUTES=webhookd.process=worker")...)

	const sender = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01"
	senderSpan := tracing.SpanContext(sender)
	traceID := senderSpan.TraceID().String()
	req, _ := http.NewRequest(http.MethodPost, gw.URL()+"/webhooks/test", strings.NewReader(`{"id":"evt_traced","type":"trace.test"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", sender)
	resp, err := sendClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("got %d, want 202", resp.StatusCode)
	}
	pipelinetest.Eventually(t, 30*time.Second, "the run done after its retry", func() bool {
		return schema.Int(t, `SELECT count(*) FROM job_runs WHERE key = $1 AND status = 'done'`, keyOf("evt_traced")) == 1
	})

	want := map[string]int{ // span name -> count
		"gateway/POST /webhooks/:source": 1, "gateway/webhookd.record": 1, "gateway/webhookd.handoff": 1,
		"worker/webhookd.deliver": 2, "worker/webhookd.claim": 2, "worker/POST": 2,
	}
	var spans []receivedSpan
	pipelinetest.Eventually(t, 15*time.Second, "every span of the event's trace exported", func() bool {
		spans = receiver.ofTrace(traceID)
		got := map[string]int{}
		for _, s := range spans {
			if s.name != "webhookd.recover" { // the reconciler may hasten a retry: not what this test is about
				got[s.process+"/"+s.name]++
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})

	// Connected: the request span's parent is the sender's span, every
	// other span's parent is a span of the trace.
	byID := map[string]receivedSpan{}
	for _, s := range spans {
		byID[s.id] = s
	}
	var request receivedSpan
	for _, s := range spans {
		if s.name == "POST /webhooks/:source" {
			request = s
			if s.parent != senderSpan.SpanID().String() {
				t.Errorf("the request span's parent is %s, want the sender's span %s", s.parent, senderSpan.SpanID())
			}
			continue
		}
		if _, ok := byID[s.parent]; !ok {
			t.Errorf("span %s/%s has parent %q, not a span of the trace", s.process, s.name, s.parent)
		}
	}
	var retryLinked int
	for _, s := range spans {
		if s.name == "webhookd.deliver" && len(s.links) == 1 && s.links[0] == request.id {
			retryLinked++
		}
	}
	if retryLinked != 1 {
		t.Errorf("%d deliver spans link to the request span, want 1 (the retry)", retryLinked)
	}

	// The destination got each call's own span as its parent.
	mu.Lock()
	defer mu.Unlock()
	if len(traceparents) != 2 {
		t.Fatalf("the destination got %d calls, want 2", len(traceparents))
	}
	for i, tp := range traceparents {
		sc := tracing.SpanContext(tp)
		call, ok := byID[sc.SpanID().String()]
		if sc.TraceID().String() != traceID || !ok || call.name != "POST" || call.process != "worker" {
			t.Errorf("call %d: traceparent %q does not name a worker's POST span of the trace", i+1, tp)
		}
	}
}

// TestTracingBadEnvironment: an OTEL_* value the exporter refuses stops
// the process with one error that names the variable and its value, and
// exit status 1, before anything starts.
func TestTracingBadEnvironment(t *testing.T) {
	t.Parallel()
	bin := proctest.Binary(t)
	config := proctest.WriteConfig(t, faultConfig("postgres://postgres@127.0.0.1:1/none", "redis://127.0.0.1:1/0", "webhookd", "http://127.0.0.1:1/"))
	for _, tc := range []struct{ env, want string }{
		{"OTEL_TRACES_EXPORTER=zipkinish", `webhookd: $OTEL_* (environment): trace exporter (OTEL_TRACES_EXPORTER="zipkinish"): `},
		{"OTEL_EXPORTER_OTLP_PROTOCOL=carrier-pigeon", `webhookd: $OTEL_* (environment): trace exporter (OTEL_EXPORTER_OTLP_PROTOCOL="carrier-pigeon"): invalid OTLP protocol`},
	} {
		p := proctest.StartProcess(t, "gateway", bin, []string{"gateway", "-f", config}, tc.env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1")
		if code := p.Wait(30 * time.Second); code != 1 || !strings.Contains(p.Logs(), tc.want) {
			t.Errorf("%s: exit %d, want 1 and %q in:\n%s", tc.env, code, tc.want, p.Logs())
		}
	}
}
