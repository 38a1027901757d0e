package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webhookd/webhookd/internal/testkit/natstest"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/internal/testkit/proctest"
	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

// TestReloadClosesBrokerConnections: a reload that removes a NATS
// destination and changes another closes their connections once the
// lease has passed; the unchanged one keeps its connection.
func TestReloadClosesBrokerConnections(t *testing.T) {
	t.Parallel()
	srv := natstest.New(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}})
	if err != nil {
		t.Fatal(err)
	}
	bin := proctest.Binary(t)
	schema := pgtest.New(t)
	rdb := redistest.New(t)
	dest := func(name, subject string) string {
		return fmt.Sprintf("{name: %s, url: %q, subject: %s, timeout: 2s}", name, srv.URL, subject)
	}
	v1 := reloadConfig(schema, rdb, dest("kept", "events.kept"), dest("changed", "events.changed"), dest("gone", "events.gone"))
	v2 := reloadConfig(schema, rdb, dest("kept", "events.kept"), dest("changed", "events.changed.v2"))
	path := proctest.WriteConfig(t, v1)
	p := proctest.StartWebhookd(t, "serve", bin, "serve", path)
	send := func(id string) {
		t.Helper()
		resp, err := sendClient.Post(p.URL()+"/webhooks/test", "application/json", strings.NewReader(fmt.Sprintf(`{"id":%q,"type":"t"}`, id)))
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("sending %s: %v %v", id, err, resp)
		}
		resp.Body.Close()
	}
	msgs := func() uint64 {
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	send("evt_1")
	pipelinetest.Eventually(t, 20*time.Second, "evt_1 in the stream three times", func() bool { return msgs() == 3 })
	if n := srv.Clients(t, "webhookd"); n != 3 {
		t.Fatalf("%d connections, want 3 (one per destination)", n)
	}

	if err := os.WriteFile(path, []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGHUP)
	pipelinetest.Eventually(t, 10*time.Second, "the reload", func() bool { return strings.Contains(p.Logs(), `"msg":"configuration reloaded"`) })
	// After the lease (3s), the retired destinations' connections close.
	pipelinetest.Eventually(t, 10*time.Second, "the retired connections closed", func() bool { return srv.Clients(t, "webhookd") == 1 })
	send("evt_2")
	pipelinetest.Eventually(t, 20*time.Second, "evt_2 in the stream twice", func() bool { return msgs() == 5 })
	if n := srv.Clients(t, "webhookd"); n != 2 {
		t.Errorf("%d connections, want 2: the kept one and the changed destination's new one", n)
	}
}
