package adminclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/termsafe"
)

// ListEvents prints a page of the events query selects (the admin API's
// filters: source, state, since, until, q, type, destination, status,
// cursor, limit), as a table or, asJSON, the API's answer.
func (c *Client) ListEvents(ctx context.Context, w io.Writer, query url.Values, asJSON bool) error {
	var page admin.EventListJSON
	raw, err := c.Get(ctx, "/admin/events", query, &page)
	if err != nil {
		return err
	}
	if asJSON {
		return PrintJSON(w, raw)
	}
	return printEventList(w, page)
}

// ShowEvent prints one event: its payload, headers, runs and attempts.
func (c *Client) ShowEvent(ctx context.Context, w io.Writer, source, id string, asJSON bool) error {
	var d admin.EventDetailJSON
	raw, err := c.Get(ctx, EventPath(source, id), nil, &d)
	if err != nil {
		return err
	}
	if asJSON {
		return PrintJSON(w, raw)
	}
	return printEvent(w, d)
}

// printEventList prints a page of events as a table, with the count and
// the cursors to the pages around it.
func printEventList(w io.Writer, page admin.EventListJSON) error {
	w = termsafe.NewWriter(w) // ids and types come from senders
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED (UTC)\tSOURCE\tEVENT ID\tTYPE\tSTATE\tDELIVERIES\tRUNS")
	for _, e := range page.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ReceivedAt.UTC().Format(time.DateTime), e.Source,
			e.EventID, e.EventType, e.State, e.Deliveries, strings.Join(e.RunStatuses, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := strconv.FormatInt(page.Total, 10)
	if page.TotalAtLeast {
		total = "at least " + total
	}
	if total == "1" {
		fmt.Fprintln(w, "1 event matches")
	} else {
		fmt.Fprintf(w, "%s events match\n", total)
	}
	if page.Prev != "" {
		fmt.Fprintf(w, "newer: add --cursor %s\n", page.Prev)
	}
	if page.Next != "" {
		fmt.Fprintf(w, "older: add --cursor %s\n", page.Next)
	}
	return nil
}

// runStatus says what will happen next to r: its shown status, why and
// until when it is held, when a retrying run tries again.
func runStatus(r admin.RunJSON) string {
	s := r.Status
	switch {
	case r.HoldReason != "" && r.HoldUntil != nil:
		s += fmt.Sprintf(" (%s, until %s, %s)", r.HoldReason, r.HoldUntil.UTC().Format(time.DateTime), fromNow(*r.HoldUntil))
	case r.HoldReason != "":
		s += " (" + r.HoldReason + ", until resumed)"
	case r.NextTryAt != nil && r.Status == "retrying":
		s += " (next try " + fromNow(*r.NextTryAt) + ")"
	}
	return s
}

// fromNow says when t is, from now: "in 12s", "3m0s ago".
func fromNow(t time.Time) string {
	d := time.Until(t).Round(time.Second)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " ago"
}

// handedOff says whether an event's tasks are in the queue.
func handedOff(e admin.EventJSON) string {
	switch {
	case e.RecordedOnly:
		return "no: imported as delivered elsewhere (--record-only); only a replay forwards it"
	case e.HandedOff:
		return "yes"
	}
	return "not yet: some planned destination has not started (its task waits in the queue, or the relay hands it off)"
}

func printEvent(w io.Writer, d admin.EventDetailJSON) error {
	w = termsafe.NewWriter(w) // payloads and answers come from senders and destinations
	ts := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.DateTime)
	}
	evType := d.EventType
	if evType == "" {
		evType = "(unknown)"
	}
	fmt.Fprintf(w, "event       %s / %s\ntype        %s\nstate       %s\nreceived    %s (last %s)\ndeliveries  %d\nhanded off  %s\ncontent     %s, %d bytes\n",
		d.Source, d.EventID, evType, d.State, ts(&d.ReceivedAt), ts(&d.LastReceivedAt), d.Deliveries, handedOff(d.EventJSON),
		d.ContentType, d.PayloadBytes)
	if d.TraceID != "" {
		fmt.Fprintf(w, "trace       %s\n", d.TraceID)
	}
	if len(d.Plan) > 0 {
		fmt.Fprintf(w, "planned for %s\n", strings.Join(d.Plan, ", "))
	}
	fmt.Fprintln(w, "\nruns:")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tGEN\tSTATUS\tFAILED ATTEMPTS\tCALLS\tREPLAYED BY\tRESULT / LAST ERROR")
	for _, r := range d.Runs {
		note := r.LastError
		if r.Result != nil {
			note = string(r.Result)
		}
		by := r.ReplayedBy
		if r.ReplayReason != "" {
			by += " (" + r.ReplayReason + ")"
		}
		if r.SkippedAt != nil {
			note = fmt.Sprintf("skipped by %s at %s (%s); %s", r.SkippedBy, ts(r.SkippedAt), r.SkipReason, note)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d/%d\t%d\t%s\t%s\n", r.Key, r.Generation, runStatus(r), r.Attempts, r.MaxAttempts, r.Calls, by, note)
	}
	for _, r := range d.Waiting {
		fmt.Fprintf(tw, "  (%s: not started)\t\t%s\t\t0\t\tplanned\n", r.Destination, runStatus(r))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nattempts:")
	for _, at := range d.Attempts {
		outcome := dedupe.Attempt{State: at.State, Succeeded: at.Succeeded, Error: at.Error}.Summary()
		fmt.Fprintf(w, "  %s  %s  call %d  HTTP %d  %s  %s\n", at.At.UTC().Format(time.DateTime), at.Key, at.Call, at.StatusCode,
			time.Duration(at.DurationMS*float64(time.Millisecond)), outcome)
		if at.RetryAt != nil {
			fmt.Fprintf(w, "      next try  %s\n", ts(at.RetryAt))
		}
		if len(at.AnswerHeaders) > 0 {
			fmt.Fprintf(w, "      headers   %s\n", at.AnswerHeaders)
		}
		switch {
		case at.AnswerBody != nil:
			body := *at.AnswerBody
			if at.AnswerTruncated {
				body += " … (cut at 4 KiB)"
			}
			fmt.Fprintf(w, "      body      %s\n", body)
		case at.AnswerBodyBase64 != "":
			fmt.Fprintf(w, "      body      (binary, base64) %s\n", at.AnswerBodyBase64)
		}
	}
	fmt.Fprintln(w, "\nheaders:")
	fmt.Fprintln(w, indentOr(d.Headers)) // the API masks credentials
	fmt.Fprintln(w, "\npayload:")
	if d.Payload == nil {
		fmt.Fprintf(w, "(binary, %d bytes)\n", d.PayloadBytes)
		return nil
	}
	_, err := fmt.Fprintln(w, indentOr([]byte(*d.Payload)))
	return err
}

func indentOr(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) == nil {
		if out, err := json.MarshalIndent(v, "", "  "); err == nil {
			return string(out)
		}
	}
	return string(b)
}
