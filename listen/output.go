package listen

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
)

// printer writes a line per event to out and notices to err, as text or
// as JSON objects.
type printer struct {
	out, err io.Writer
	json     bool
}

// EventLine is one event's line with --json.
type EventLine struct {
	// ReceivedAt is when the gateway recorded the event.
	ReceivedAt time.Time `json:"received_at"`
	// ForwardedAt is when the call the local app settled started.
	ForwardedAt time.Time `json:"forwarded_at"`
	Source      string    `json:"source"`
	Type        string    `json:"type,omitempty"`
	EventID     string    `json:"event_id"`
	Key         string    `json:"key"`
	// Cursor is the event's position: --from <cursor> starts after it.
	Cursor string `json:"cursor"`
	// Status is the local app's answer.
	Status int `json:"status"`
	// LatencyMS is the local call's duration.
	LatencyMS float64 `json:"latency_ms"`
	// LagMS is from the gateway's record to the local call.
	LagMS float64 `json:"lag_ms"`
	// Calls counts the calls this event took (more while the local URL
	// was down).
	Calls int `json:"calls"`
}

// NoticeLine is a notice with --json.
type NoticeLine struct {
	Time   time.Time `json:"time"`
	Notice string    `json:"notice"`
	// Behind, in a behind notice, counts the events to forward;
	// BehindAtLeast says there may be more.
	Behind        *int `json:"behind,omitempty"`
	BehindAtLeast bool `json:"behind_at_least,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// event prints ev's line: settled with o at its calls-th call, started
// at at.
func (p *printer) event(ev admin.StreamEventJSON, o outcome, calls int, at time.Time) {
	lag := at.Sub(ev.ReceivedAt)
	if p.json {
		p.writeJSON(p.out, EventLine{
			ReceivedAt: ev.ReceivedAt, ForwardedAt: at, Source: ev.Source, Type: ev.EventType, EventID: ev.EventID,
			Key: ev.Key, Cursor: ev.Cursor, Status: o.status, LatencyMS: ms(o.duration), LagMS: ms(lag), Calls: calls,
		})
		return
	}
	typ := ev.EventType
	if typ == "" {
		typ = "-"
	}
	note := ""
	if o.status >= 300 {
		note = " refused, not retried"
	}
	if calls > 1 {
		note += fmt.Sprintf(" after %d calls", calls)
	}
	fmt.Fprintf(p.out, "%s  %s  %s  %s  → %d%s  %s  lag %s\n", ev.ReceivedAt.Local().Format("2006-01-02 15:04:05.000"),
		ev.Source, typ, ev.EventID, o.status, note, round(o.duration), round(lag))
}

// round shortens a duration for a line: milliseconds below a minute.
func round(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

func (p *printer) notice(msg string) {
	if p.json {
		p.writeJSON(p.err, NoticeLine{Time: time.Now(), Notice: msg})
		return
	}
	fmt.Fprintln(p.err, "webhookd listen: "+msg)
}

// behind prints how many events wait.
func (p *printer) behind(msg string, n int, atLeast bool) {
	if p.json {
		p.writeJSON(p.err, NoticeLine{Time: time.Now(), Notice: msg, Behind: &n, BehindAtLeast: atLeast})
		return
	}
	p.notice(msg)
}

func (p *printer) writeJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}
