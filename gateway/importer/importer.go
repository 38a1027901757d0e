// Package importer backfills events from a provider's export, one JSON
// event per line, as if each had been delivered to a source: each line
// is stored on its natural key (source, event id) only if it is not
// stored yet, in batches of one statement, so an import can be rerun
// from the start after any failure and forwards nothing twice.
// Signatures are not checked: the export is trusted.
package importer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/eventid"
)

// Summary counts what an import did.
type Summary struct {
	// Lines counts the lines that are not blank.
	Lines int
	// New and Known count the events stored now and those stored before.
	New   int
	Known int
	// Rejected names the lines not stored, and why.
	Rejected []RejectedLine
	// OlderThanRetention counts the new events whose received_at is
	// older than retention: the next retention run deletes them.
	OlderThanRetention int
}

// RejectedLine is a line not stored, by its number in the input.
type RejectedLine struct {
	Line   int
	Reason string
}

// Importer reads a JSON Lines export and stores each line as an event of
// one source, in batches.
type Importer struct {
	// Store records the events.
	Store *dedupe.Store
	// Source is the source the events belong to.
	Source string
	// Name is the input's name (a file's base name, or "stdin"), kept
	// with each event as X-Webhookd-Import: <name>:<line>.
	Name string
	// ID reads each event's id.
	ID eventid.Extractor
	// EventType reads each event's type: the source's json: event_type
	// (or its scheme's); nil when it is in a header, which an export has
	// not (the events are stored with an unknown type).
	EventType *eventid.Extractor
	// Entity and Version, when set, read each event's order fields.
	Entity, Version *eventid.Extractor
	// ContentType is stored and forwarded with each event.
	ContentType string
	// MaxBytes refuses longer lines (max_body_bytes).
	MaxBytes int64
	// BatchSize is the lines stored per statement; at least 1.
	BatchSize int
	// ReceivedAt is the gjson path of the provider's time of each event
	// (--received-at json:<path>); empty stores the import's time.
	ReceivedAt string
	// Options say how the events are recorded (recorded only).
	Options dedupe.ImportOptions
	// Now and Retention place received_at: not in the future, and counted
	// when older than retention.
	Now       time.Time
	Retention time.Duration
}

// Run reads r line by line, storing a batch whenever it fills, and
// reports each line's bytes to progress (when not nil). Sum.Lines counts the lines that are not
// blank; a rejected line is named by its line number in the input. A batch is one statement: a crash loses at
// most the lines of the batch being built, and a rerun stores them.
func (im *Importer) Run(ctx context.Context, r io.Reader, progress func(bytes int)) (Summary, error) {
	var (
		sum    Summary
		batch  = make([]dedupe.ImportedEvent, 0, im.BatchSize)
		br     = bufio.NewReaderSize(r, 1<<20)
		cutoff = im.Now.Add(-im.Retention)
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		inserted, err := im.Store.ImportEvents(ctx, batch, im.Options)
		if err != nil {
			return err
		}
		for i, ok := range inserted {
			if !ok {
				sum.Known++
				continue
			}
			sum.New++
			if at := batch[i].ReceivedAt; !at.IsZero() && at.Before(cutoff) {
				sum.OlderThanRetention++
			}
		}
		batch = batch[:0]
		return nil
	}
	for n := 1; ; n++ { // n is the line number in the input, blank lines included
		line, readErr := br.ReadBytes('\n')
		if len(line) > 0 {
			if progress != nil {
				progress(len(line))
			}
			sum.Lines++
			ev, reason := im.parse(bytes.TrimSpace(line), n)
			switch {
			case reason == "blank":
				sum.Lines--
			case reason != "":
				sum.Rejected = append(sum.Rejected, RejectedLine{Line: n, Reason: reason})
			default:
				batch = append(batch, ev)
				if len(batch) == im.BatchSize {
					if err := flush(); err != nil {
						return sum, err
					}
				}
			}
		}
		if errors.Is(readErr, io.EOF) {
			break
		}
		if readErr != nil {
			return sum, fmt.Errorf("error reading import input: %w", readErr)
		}
	}
	return sum, flush()
}

// parse turns line n into an event, or names why it is rejected
// ("blank" for an empty line, which is skipped).
func (im *Importer) parse(line []byte, n int) (dedupe.ImportedEvent, string) {
	if len(line) == 0 {
		return dedupe.ImportedEvent{}, "blank"
	}
	if int64(len(line)) > im.MaxBytes {
		return dedupe.ImportedEvent{}, fmt.Sprintf("longer than max_body_bytes (%d)", im.MaxBytes)
	}
	if !json.Valid(line) {
		return dedupe.ImportedEvent{}, "not valid JSON"
	}
	header := http.Header{"Content-Type": {im.ContentType}}
	read := eventid.NewBody(line)
	id, err := im.ID.ExtractFrom(header, &read)
	if err != nil {
		return dedupe.ImportedEvent{}, "event id: " + err.Error()
	}
	var at time.Time
	if im.ReceivedAt != "" {
		var reason string
		if at, reason = providerTime(line, im.ReceivedAt, im.Now); reason != "" {
			return dedupe.ImportedEvent{}, "received-at json:" + im.ReceivedAt + ": " + reason
		}
	}
	header.Set("X-Webhookd-Import", im.Name+":"+strconv.Itoa(n))
	hj, _ := json.Marshal(header)
	ev := dedupe.ImportedEvent{
		Event:      dedupe.Event{Source: im.Source, ExternalID: id, ContentType: im.ContentType, Headers: hj, Payload: bytes.Clone(line)},
		ReceivedAt: at,
	}
	if im.EventType != nil {
		if t, err := im.EventType.ExtractFrom(header, &read); err == nil {
			ev.EventType = t
		} else if errors.Is(err, eventid.ErrInvalid) {
			return dedupe.ImportedEvent{}, "event type: " + err.Error()
		}
	}
	if im.Entity != nil {
		e, errE := im.Entity.ExtractFrom(header, &read)
		v, errV := im.Version.ExtractFrom(header, &read)
		if errE == nil && errV == nil {
			ev.OrderEntity, ev.OrderVersion = e, v
		}
	}
	return ev, ""
}

// maxFuture is how far past now a provider's time may lie (clocks
// differ); later ones are refused: they would sort above every live event
// and outlive retention.
const maxFuture = 5 * time.Minute

// providerTime reads an event's time at the gjson path of line: a number
// is Unix seconds (Stripe's "created"), a string RFC 3339. It returns why
// not when the value is missing, does not parse, or lies in the future.
func providerTime(line []byte, path string, now time.Time) (time.Time, string) {
	r := gjson.GetBytes(line, path)
	latest := now.Add(maxFuture)
	switch {
	case !r.Exists():
		return time.Time{}, "missing"
	case r.Type == gjson.Number:
		if r.Num <= 0 || math.IsNaN(r.Num) {
			return time.Time{}, fmt.Sprintf("%s is not a positive number of Unix seconds", r.Raw)
		}
		if r.Num > float64(latest.Unix()) {
			return time.Time{}, fmt.Sprintf("%s lies in the future as Unix seconds (milliseconds?)", r.Raw)
		}
		sec, frac := math.Modf(r.Num)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), ""
	case r.Type == gjson.String:
		t, err := time.Parse(time.RFC3339Nano, r.Str)
		if err != nil {
			return time.Time{}, fmt.Sprintf("%q is not an RFC 3339 time", truncate(r.Str, 64))
		}
		if t.After(latest) {
			return time.Time{}, fmt.Sprintf("%s lies in the future", r.Str)
		}
		return t, ""
	}
	return time.Time{}, "is neither a number (Unix seconds) nor an RFC 3339 string"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// maxRejectedShown caps the rejected lines listed in the summary.
const maxRejectedShown = 100

// Print writes the summary of an import of name into source to w
// (stdout).
func (s Summary) Print(w io.Writer, name, source string, recordOnly bool) {
	how := ""
	if recordOnly {
		how = " (recorded only)"
	}
	fmt.Fprintf(w, "imported %s into source %s%s: %d lines, %d new, %d already known, %d rejected\n",
		name, source, how, s.Lines, s.New, s.Known, len(s.Rejected))
	for i, r := range s.Rejected {
		if i == maxRejectedShown {
			fmt.Fprintf(w, "  … and %d more rejected lines\n", len(s.Rejected)-maxRejectedShown)
			break
		}
		fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Reason)
	}
	switch {
	case s.New > 0 && recordOnly:
		fmt.Fprintln(w, "new events are recorded as delivered elsewhere (state recorded_only): nothing forwards them; webhookd replay does if needed")
	case s.New > 0:
		fmt.Fprintln(w, "new events are handed to the queue by the relay of a running gateway (webhookd gateway or serve)")
	}
}

// rejectedOnStderr is how many rejected lines the error summary names.
const rejectedOnStderr = 5

// ReportProblems writes to w (stderr) what an operator must know
// about an import that finished: new events that retention is about to
// delete, and the rejected lines, in which case it returns an error, so
// the exit status says the import was not whole.
func (s Summary) ReportProblems(w io.Writer, retention time.Duration) error {
	if s.OlderThanRetention > 0 {
		fmt.Fprintf(w, "webhookd import: %d new events have a received_at older than retention (%s): the next retention run deletes them, "+
			"and a delivery of one of them after that is a new event\n", s.OlderThanRetention, retention)
	}
	if len(s.Rejected) == 0 {
		return nil
	}
	fmt.Fprintf(w, "webhookd import: %d of %d lines rejected (%d new, %d already known); first rejected:\n",
		len(s.Rejected), s.Lines, s.New, s.Known)
	for _, r := range s.Rejected[:min(len(s.Rejected), rejectedOnStderr)] {
		fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Reason)
	}
	return fmt.Errorf("import incomplete: %d of %d lines rejected", len(s.Rejected), s.Lines)
}
