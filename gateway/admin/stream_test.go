package admin_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
)

const (
	streamToken   = "stream-test-full-token-0123"
	streamROToken = "stream-test-read-only-token-0123"
)

// getStream calls GET /admin/events/stream with query and token and
// returns the status, the raw answer and the decoded one.
func getStream(t *testing.T, p *pipelinetest.Pipeline, token string, query url.Values) (int, string, admin.StreamJSON) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.URL+"/admin/events/stream?"+query.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out admin.StreamJSON
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("stream answer is not JSON: %s", raw)
		}
	}
	return resp.StatusCode, string(raw), out
}

func streamPipeline(t *testing.T) *pipelinetest.Pipeline {
	t.Helper()
	dest := httptest.NewServer(&destination{status: http.StatusOK})
	t.Cleanup(dest.Close)
	return pipelinetest.Start(t, pipelinetest.Options{
		Destinations:        map[string]string{destName: dest.URL},
		AdminTokens:         []string{streamToken},
		AdminReadOnlyTokens: []string{streamROToken},
	})
}

// TestStreamFollowsRecordedEvents: a follower with a read-only token
// asks from now, then long-polls after the cursor it got: the answer
// comes as soon as events are recorded, not after the wait, with each
// event's raw body, its stored headers less the masked signature, its
// key <source>:listen:<id>, and how the source signs with no secret in
// the whole answer. Asking after the last cursor gives nothing again.
func TestStreamFollowsRecordedEvents(t *testing.T) {
	t.Parallel()
	p := streamPipeline(t)
	code, raw, first := getStream(t, p, streamROToken, url.Values{"after": {"now"}, "wait": {"0s"}})
	if code != http.StatusOK || len(first.Events) != 0 || first.Next == "" {
		t.Fatalf("from now: %d %s", code, raw)
	}

	sent := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		sent <- time.Now()
		close(sent)
		for i := range 3 {
			b := fmt.Appendf(nil, `{"id":"evt_s%d","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`, i)
			if code, body := p.Send(t, b); code != http.StatusAccepted {
				t.Errorf("send: %d %s", code, body)
			}
		}
	}()
	start := time.Now()
	var got []admin.StreamEventJSON
	next := first.Next
	var answer admin.StreamJSON
	for len(got) < 3 && time.Since(start) < 20*time.Second {
		code, raw, answer = getStream(t, p, streamROToken, url.Values{"after": {next}, "wait": {"10s"}})
		if code != http.StatusOK {
			t.Fatalf("stream: %d %s", code, raw)
		}
		if at, ok := <-sent; ok && len(answer.Events) > 0 {
			if waited := time.Since(at); waited > 5*time.Second {
				t.Errorf("the long poll answered %s after the first event was sent; want at once", waited)
			}
		}
		if strings.Contains(raw, pipelinetest.Secret) {
			t.Fatalf("the stream carries the source's secret: %s", raw)
		}
		got = append(got, answer.Events...)
		next = answer.Next
		if len(answer.Events) > 0 {
			if s, ok := answer.Sources[pipelinetest.Source]; !ok || s.Scheme != "stripe" {
				t.Errorf("sources = %+v, want stripe's scheme", answer.Sources)
			}
		}
	}
	if len(got) != 3 {
		t.Fatalf("got %d events, want 3", len(got))
	}
	for i, ev := range got {
		id := fmt.Sprintf("evt_s%d", i)
		if ev.EventID != id || ev.Source != pipelinetest.Source || ev.Key != pipelinetest.Source+":listen:"+id ||
			ev.EventType != "invoice.paid" || ev.ContentType != "application/json" || ev.Cursor == "" ||
			string(ev.Payload) != fmt.Sprintf(`{"id":%q,"type":"invoice.paid","data":{"object":{"id":"in_1"}}}`, id) {
			t.Errorf("event %d = %+v", i, ev)
		}
		if _, ok := ev.Headers["Stripe-Signature"]; ok {
			t.Errorf("event %d carries the masked signature header: %v", i, ev.Headers)
		}
		if len(ev.Headers["Content-Type"]) != 1 {
			t.Errorf("event %d headers = %v, want the stored Content-Type", i, ev.Headers)
		}
	}
	last, err1 := dedupe.ParseFeedCursor(got[2].Cursor)
	end, err2 := dedupe.ParseFeedCursor(next)
	if err1 != nil || err2 != nil || end.Less(last) {
		t.Errorf("next = %s, want a cursor not before the last event's %s", next, got[2].Cursor)
	}
	code, raw, again := getStream(t, p, streamROToken, url.Values{"after": {got[0].Cursor}, "wait": {"0s"}, "count": {"1"}})
	if code != http.StatusOK || len(again.Events) != 2 || again.Events[0].EventID != "evt_s1" || again.Behind == nil || *again.Behind != 0 {
		t.Fatalf("after the first event's cursor: %d %s; want the other two and nothing behind", code, raw)
	}
	code, raw, since := getStream(t, p, streamROToken, url.Values{"since": {"1h"}, "wait": {"0s"}, "type": {"invoice.*"}, "source": {pipelinetest.Source}})
	if code != http.StatusOK || len(since.Events) != 3 {
		t.Fatalf("since 1h: %d %s; want the three events", code, raw)
	}
}

// TestStreamRefusesBadRequests: the stream needs a token (a read-only
// one is enough) and answers a value it cannot use (an unknown source
// too) with 400 saying which, before reading anything.
func TestStreamRefusesBadRequests(t *testing.T) {
	t.Parallel()
	p := streamPipeline(t)
	for _, c := range []struct {
		token string
		query url.Values
		want  int
		says  string
	}{
		{"", url.Values{}, http.StatusUnauthorized, "token"},
		{"wrong-token-0123456789", url.Values{}, http.StatusUnauthorized, "token"},
		{streamToken, url.Values{"wait": {"0s"}}, http.StatusOK, ""},
		{streamROToken, url.Values{"after": {"not-a-cursor"}}, http.StatusBadRequest, "after"},
		{streamROToken, url.Values{"after": {"1.2"}, "since": {"1h"}}, http.StatusBadRequest, "not both"},
		{streamROToken, url.Values{"since": {"yesterday"}}, http.StatusBadRequest, "since"},
		{streamROToken, url.Values{"source": {"nope"}}, http.StatusBadRequest, "unknown source"},
		{streamROToken, url.Values{"type": {"a[b"}}, http.StatusBadRequest, "type"},
		{streamROToken, url.Values{"limit": {"0"}}, http.StatusBadRequest, "limit"},
		{streamROToken, url.Values{"wait": {"1m"}}, http.StatusBadRequest, "wait"},
		{streamROToken, url.Values{"count": {"yes"}}, http.StatusBadRequest, "count"},
		{streamROToken, url.Values{"cursor": {"1.2"}}, http.StatusBadRequest, "unknown parameter"},
		{streamROToken, url.Values{"after": {"1.2\x00"}}, http.StatusBadRequest, "after"},
	} {
		code, raw, _ := getStream(t, p, c.token, c.query)
		if code != c.want || !strings.Contains(raw, c.says) {
			t.Errorf("%v: %d %s; want %d saying %q", c.query, code, raw, c.want, c.says)
		}
	}
}
