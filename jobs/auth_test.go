package jobs_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// TestHTTPCredentials: an HTTP destination's static headers and auth go
// with every call, a header the call sets itself cannot be overridden,
// each signing secret signs (a receiver on the old or the new secret
// verifies the call), and no credential is in what is stored of the run
// or its calls.
func TestHTTPCredentials(t *testing.T) {
	t.Parallel()
	const (
		oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		newSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	)
	for _, tc := range []struct {
		name       string
		auth       *jobs.AuthSpec
		wantHeader string
		wantValue  string
	}{
		{"bearer", &jobs.AuthSpec{Bearer: "tok-secret-1"}, "Authorization", "Bearer tok-secret-1"},
		{"basic", &jobs.AuthSpec{Basic: &jobs.BasicAuthSpec{User: "u", Password: "pw-secret-2"}}, "Authorization", "Basic dTpwdy1zZWNyZXQtMg=="},
		{"header", &jobs.AuthSpec{Header: &jobs.HeaderAuthSpec{Name: "X-Api-Key", Value: "key-secret-3"}}, "X-Api-Key", "key-secret-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDestination(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
				w.WriteHeader(http.StatusBadRequest) // a failed call: its error and answer are stored
			})
			b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: d.URL, MaxAttempts: 1, Auth: tc.auth,
				Headers: map[string]string{"X-Team": "payments"}, SigningSecrets: []string{newSecret, oldSecret}}})
			q := b.startWorker(t)
			b.record(t, "evt_1", `{"id":"evt_1"}`)
			if _, err := q.enqueuer.EnqueueEvents(testCtx(t), []dedupe.EventRef{{Source: "src", ExternalID: "evt_1"}}); err != nil {
				t.Fatal(err)
			}
			pipelinetest.Eventually(t, 10*time.Second, "the run failed", func() bool { return b.status(t, "src:dst:evt_1") == dedupe.StatusFailed })
			calls := d.Calls()
			if len(calls) != 1 {
				t.Fatalf("%d calls, want 1", len(calls))
			}
			got, body := calls[0].Header, []byte(calls[0].Body)
			if got.Get(tc.wantHeader) != tc.wantValue || got.Get("X-Team") != "payments" || got.Get("Idempotency-Key") != "src:dst:evt_1" {
				t.Errorf("the call's headers: %v", got)
			}
			for _, secret := range []string{oldSecret, newSecret} {
				v, err := verify.New(verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{secret}})
				if err != nil {
					t.Fatal(err)
				}
				if err := v.Verify(verify.Request{Method: http.MethodPost, Header: got, Body: body}, time.Now()); err != nil {
					t.Errorf("a receiver on %s…: %v", secret[:10], err)
				}
			}
			stored := fmt.Sprint(b.schema.Int(t, `SELECT count(*) FROM job_runs j, delivery_attempts a
				WHERE a.key = j.key AND (j::text LIKE '%secret%' OR a::text LIKE '%secret%' OR a::text LIKE '%dTpw%')`))
			if stored != "0" {
				t.Errorf("%s rows of the run or its calls hold the credential", stored)
			}
		})
	}
}

// TestDestinationConfigRefusesBadCredentials: auth and headers are
// checked when the configuration is read, without quoting a value.
func TestDestinationConfigRefusesBadCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec jobs.DestinationSpec
		want string
	}{
		{jobs.DestinationSpec{Auth: &jobs.AuthSpec{Bearer: "a", Header: &jobs.HeaderAuthSpec{Name: "X-K", Value: "b"}}}, "auth: give only one"},
		{jobs.DestinationSpec{Auth: &jobs.AuthSpec{}}, "auth: give one of"},
		{jobs.DestinationSpec{Auth: &jobs.AuthSpec{Header: &jobs.HeaderAuthSpec{Name: "Idempotency-Key", Value: "v"}}}, "auth.header.name: Idempotency-Key is set by webhookd"},
		{jobs.DestinationSpec{Auth: &jobs.AuthSpec{Bearer: "line\nbreak-secret"}}, "auth: the credential holds a character"},
		{jobs.DestinationSpec{Headers: map[string]string{"Webhookd-Source": "x"}}, "headers: Webhookd-Source is set by webhookd"},
		{jobs.DestinationSpec{URL: "nats://127.0.0.1:4222"}, "subject: required"},
		{jobs.DestinationSpec{URL: "nats://127.0.0.1:4222", Subject: "a.{tenant}"}, "subject: only {source}"},
		{jobs.DestinationSpec{Subject: "a.b"}, "subject: applies only to a nats:// destination"},
		{jobs.DestinationSpec{URL: "ftp://h/x"}, `scheme "ftp" is not a destination kind`},
	} {
		spec := tc.spec
		spec.Name = "d"
		if spec.URL == "" {
			spec.URL = "http://127.0.0.1:1/"
		}
		_, err := jobs.NewDestination(spec, jobs.DestinationOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%+v: %v, want an error saying %q without the value", tc.spec, err, tc.want)
		}
	}
}
