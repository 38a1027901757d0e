package verify_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/sendertest"
)

// TestSNS verifies SNS messages signed as AWS documents it under a
// certificate of a test CA, served by a local HTTPS server that only
// the test's trust allows: both signature versions; the certificate is
// fetched once; a wrong topic, an altered message, another key, a
// certificate URL off the allowed hosts or over http, an unknown
// signature version and a missing signature are refused (the off-host
// URL without a request); an unreachable certificate is "try later".
func TestSNS(t *testing.T) {
	t.Parallel()
	sns := sendertest.NewSNS(t)
	cfg := verify.Config{Scheme: verify.SchemeSNS, Secrets: []string{"arn:aws:sns:eu-west-1:123456789012:other", sns.Topic}, SNS: sns.Trust}
	v, err := verify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	check := func(name string, m sendertest.Message, body []byte, want error) {
		t.Helper()
		if body == nil {
			body = sns.Body(t, m)
		}
		err := verify.VerifyContext(context.Background(), v, verify.Request{Method: http.MethodPost, Header: sendertest.Header(m), Body: body}, now)
		if !errors.Is(err, want) || want == nil && err != nil {
			t.Errorf("%s: Verify = %v, want %v", name, err, want)
		}
	}
	n := sns.Notification("22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324")
	check("version 1", n, nil, nil)
	v2 := n
	v2.Version = "2"
	check("version 2", v2, nil, nil)
	noSubject := n
	noSubject.Subject = ""
	check("no subject", noSubject, nil, nil)
	if got := sns.CertFetches.Load(); got != 1 {
		t.Errorf("certificate fetched %d times, want once (cached)", got)
	}

	wrongTopic := n
	wrongTopic.TopicArn = "arn:aws:sns:us-east-1:123456789012:not-ours"
	check("another topic", wrongTopic, nil, verify.ErrSignatureMismatch)
	check("altered message", n, []byte(strings.Replace(string(sns.Body(t, n)), "1000", "9000", 1)), verify.ErrSignatureMismatch)
	other := n
	other.OtherKey = true
	check("another key", other, nil, verify.ErrSignatureMismatch)
	v3 := n
	v3.Version = "3"
	check("signature version 3", v3, nil, verify.ErrMalformedSignature)
	for _, u := range []string{
		"https://sns.us-east-1.amazonaws.com.evil.example/SimpleNotificationService-test.pem",
		strings.Replace(sns.CertURL, "https://", "http://", 1),
		strings.Replace(sns.CertURL, ".pem", ".txt", 1),
		"https://user@" + strings.TrimPrefix(sns.CertURL, "https://"),
	} {
		m := n
		m.SigningCertURL = u
		check("certificate at "+u, m, nil, verify.ErrMalformedSignature)
	}
	check("no signature", n, []byte(strings.Replace(string(sns.Body(t, n)), `"Signature":`, `"Unsigned":`, 1)), verify.ErrMissingSignature)
	check("not JSON", n, []byte("Type=Notification"), verify.ErrMalformedSignature)
	gone := n
	gone.SigningCertURL = sns.Server.URL + "/missing.pem"
	check("certificate not served", gone, nil, verify.ErrKeyUnavailable)
	if got := sns.CertFetches.Load(); got != 1 {
		t.Errorf("certificate fetched %d times, want once: refused URLs must not be fetched", got)
	}

	// Production's host check, with no test trust.
	prod, err := verify.New(verify.Config{Scheme: verify.SchemeSNS, Secrets: []string{sns.Topic}})
	if err != nil {
		t.Fatal(err)
	}
	err = prod.Verify(verify.Request{Method: http.MethodPost, Body: sns.Body(t, n)}, now)
	if !errors.Is(err, verify.ErrMalformedSignature) || !strings.Contains(err.Error(), "sns.<region>.amazonaws.com") {
		t.Errorf("production trust, local certificate URL: Verify = %v, want malformed naming sns.<region>.amazonaws.com", err)
	}
	for _, bad := range []string{"orders", "arn:aws:sqs:us-east-1:123456789012:q"} {
		if err := (verify.Config{Scheme: verify.SchemeSNS, Secrets: []string{bad}}).Validate(); err == nil || !strings.HasPrefix(err.Error(), "verify.secrets[0]") {
			t.Errorf("topic %q: Validate = %v", bad, err)
		}
	}
}

// TestSNSSubscription answers SubscriptionConfirmation: confirmed by
// visiting its SubscribeURL (default) or shown for an operator; only
// once verified, and never at a SubscribeURL off the allowed hosts.
func TestSNSSubscription(t *testing.T) {
	t.Parallel()
	sns := sendertest.NewSNS(t)
	ctx := context.Background()
	confirm, _ := verify.New(verify.Config{Scheme: verify.SchemeSNS, Secrets: []string{sns.Topic}, SNS: sns.Trust})
	show, _ := verify.New(verify.Config{Scheme: verify.SchemeSNS, Secrets: []string{sns.Topic}, SNS: sns.Trust, SubscriptionConfirmation: verify.SNSShow})
	req := func(m sendertest.Message) verify.Request {
		return verify.Request{Method: http.MethodPost, Header: sendertest.Header(m), Body: sns.Body(t, m)}
	}

	a, ok, err := verify.HandshakeContext(ctx, confirm, req(sns.Confirmation("token-1")), time.Now())
	if err != nil || !ok || a.Status != http.StatusOK {
		t.Fatalf("confirm: %+v %v %v", a, ok, err)
	}
	if got := sns.Confirmed(); len(got) != 1 || got[0] != "token-1" {
		t.Fatalf("confirmed %v, want [token-1]", got)
	}
	m := sns.Confirmation("token-2")
	a, ok, err = verify.HandshakeContext(ctx, show, req(m), time.Now())
	if err != nil || !ok || !strings.Contains(a.Note, m.SubscribeURL) {
		t.Fatalf("show: %+v %v %v, want a note with the SubscribeURL", a, ok, err)
	}
	if got := sns.Confirmed(); len(got) != 1 {
		t.Errorf("show visited the SubscribeURL: %v", got)
	}

	forged := sns.Confirmation("token-3")
	forged.OtherKey = true
	if _, ok, err := verify.HandshakeContext(ctx, confirm, req(forged), time.Now()); ok || !errors.Is(err, verify.ErrSignatureMismatch) {
		t.Errorf("forged confirmation: ok %v err %v, want a mismatch", ok, err)
	}
	offHost := sns.Confirmation("token-4")
	offHost.SubscribeURL = "https://attacker.example/?Action=ConfirmSubscription&Token=token-4"
	if _, ok, err := verify.HandshakeContext(ctx, confirm, req(offHost), time.Now()); ok || !errors.Is(err, verify.ErrMalformedSignature) {
		t.Errorf("SubscribeURL off host: ok %v err %v, want malformed", ok, err)
	}
	if got := sns.Confirmed(); len(got) != 1 {
		t.Errorf("refused confirmations were visited: %v", got)
	}
	// A notification is no handshake.
	if _, ok, err := verify.HandshakeContext(ctx, confirm, req(sns.Notification("n1")), time.Now()); ok || err != nil {
		t.Errorf("notification: ok %v err %v, want no handshake", ok, err)
	}
}
