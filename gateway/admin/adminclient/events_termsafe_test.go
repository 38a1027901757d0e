package adminclient

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
)

// TestEventsShowIsTerminalSafe: what a sender or a destination wrote
// (a payload that is not JSON, an answer body, a stored result, an event
// type) reaches the operator's terminal with its control and
// bidirectional characters escaped, so it cannot clear the screen,
// rewrite earlier lines or hide text (issue 23, L3). Before, events show
// printed them raw.
func TestEventsShowIsTerminalSafe(t *testing.T) {
	t.Parallel()
	const (
		clear   = "\x1b[2J\x1b[H"
		rewrite = "\x1b[1A\x1b[2K"
		hide    = "\r\x1b[8m"
		bidi    = "\u202e"
	)
	payload := "not json " + clear + "payload" + hide
	answer := "answer " + rewrite + "ok" + bidi
	d := admin.EventDetailJSON{
		EventJSON: admin.EventJSON{Source: "acme", EventID: "evt_1", EventType: "type" + bidi, ReceivedAt: time.Now()},
		Payload:   &payload,
		Runs:      []admin.RunJSON{{Key: "acme:evt_1:app", Status: "done", Result: json.RawMessage(`"` + rewrite + `"`)}},
		Attempts:  []admin.AttemptJSON{{Key: "acme:evt_1:app", Call: 1, StatusCode: 200, AnswerBody: &answer}},
	}
	var out bytes.Buffer
	if err := printEvent(&out, d); err != nil {
		t.Fatal(err)
	}
	var list bytes.Buffer
	if err := printEventList(&list, admin.EventListJSON{Events: []admin.EventJSON{d.EventJSON}}); err != nil {
		t.Fatal(err)
	}
	for name, printed := range map[string]string{"events show": out.String(), "events list": list.String()} {
		if i := strings.IndexAny(printed, "\x1b\r\u202e"); i >= 0 {
			t.Errorf("%s printed a control character at %d:\n%q", name, i, printed)
		}
	}
	for _, want := range []string{`not json \x1b[2J\x1b[Hpayload\r\x1b[8m`, `answer \x1b[1A\x1b[2Kok\u202e`, `type\u202e`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("events show does not show %s escaped:\n%s", want, out.String())
		}
	}
}
