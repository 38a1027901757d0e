package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// Bodies and signers of the senders added with issue 15, each signer an
// implementation written from the provider's docs, independent of
// package verify.

func bodySHA256(body []byte, _ string) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

func hmacSHA256(key string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, []byte(key))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// metaBody is a WhatsApp Cloud API delivery: one POST, one entry, one
// change (Meta batches several; the POST is the event).
func metaBody(id string) []byte {
	return fmt.Appendf(nil, `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","messages":[{"id":"wamid.%s","type":"text","text":{"body":"amount 1000"}}]},"field":"messages"}]}]}`, id)
}

// signMeta signs as developers.facebook.com documents it:
// X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body, app secret>.
func signMeta(_ *testing.T, cfg verify.Config, body []byte, _ time.Time, _ string) (http.Header, string) {
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(hmacSHA256(cfg.Secrets[0], body)))
	return h, ""
}

// zoomBody is a Zoom meeting.started event.
func zoomBody(id string) []byte {
	return fmt.Appendf(nil, `{"event":"meeting.started","event_ts":1700000000000,"payload":{"account_id":"acc_1","object":{"id":%q,"topic":"amount 1000"}}}`, id)
}

// signZoom signs as zoom/webhook-sample does: x-zm-signature:
// v0=<hex HMAC-SHA256 of "v0:<x-zm-request-timestamp>:<body>">.
func signZoom(_ *testing.T, cfg verify.Config, body []byte, at time.Time, _ string) (http.Header, string) {
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set("x-zm-request-timestamp", ts)
	h.Set("x-zm-signature", "v0="+hex.EncodeToString(hmacSHA256(cfg.Secrets[0], []byte("v0:"+ts+":"), body)))
	return h, ""
}
