package verify_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// Sign a payload as Stripe would, then verify it, and see a tampered copy
// fail.
func ExampleSign() {
	cfg := verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"whsec_example"}}
	body := []byte(`{"id":"evt_123","type":"invoice.paid"}`)
	now := time.Unix(1_700_000_000, 0)

	header, rawQuery, err := verify.Sign(cfg, body, now, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(header.Get("Stripe-Signature")[:13])

	v, err := verify.New(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verify(verify.Request{Header: header, Body: body, RawQuery: rawQuery}, now.Add(time.Minute)))

	err = v.Verify(verify.Request{Header: header, Body: []byte(`{"id":"evt_124"}`)}, now)
	fmt.Println(errors.Is(err, verify.ErrSignatureMismatch), err)

	err = v.Verify(verify.Request{Header: header, Body: body}, now.Add(time.Hour))
	fmt.Println(errors.Is(err, verify.ErrTimestampOutsideTolerance))
	// Output:
	// t=1700000000,
	// <nil>
	// true Stripe-Signature: no configured secret matches: signature mismatch
	// true
}

// Verify a Standard Webhooks delivery; the same code accepts Svix's
// svix-* headers.
func ExampleNew() {
	cfg := verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	body := []byte(`{"type":"user.created"}`)
	now := time.Unix(1_700_000_000, 0)
	header, _, _ := verify.Sign(cfg, body, now, "msg_1")

	v, err := verify.New(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verify(verify.Request{Header: header, Body: body}, now))
	fmt.Println(verify.SchemeDefaults(cfg.Scheme).EventID)
	// Output:
	// <nil>
	// header:webhook-id
}
