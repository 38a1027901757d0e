package gateway_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
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

// ed25519Keys are deterministic Ed25519 key pairs by name; publicHex
// gives the hex public key (what Discord's portal shows), and
// ed25519Private finds the private key of such a public key.
var (
	ed25519Mu   sync.Mutex
	ed25519Keys = map[string]ed25519.PrivateKey{}
)

func publicHex(name string) string {
	seed := sha256.Sum256([]byte(name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := hex.EncodeToString(priv.Public().(ed25519.PublicKey))
	ed25519Mu.Lock()
	ed25519Keys[pub] = priv
	ed25519Mu.Unlock()
	return pub
}

// discordBody is a webhook event (APPLICATION_AUTHORIZED).
func discordBody(id string) []byte {
	return fmt.Appendf(nil, `{"version":1,"application_id":"1234","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024-10-18T14:42:53.064834","data":{"integration_type":1,"scopes":["applications.commands"],"user":{"id":%q,"username":"amount 1000"}}}}`, id)
}

// signDiscord signs as Discord documents it: X-Signature-Ed25519 is the
// hex Ed25519 signature of X-Signature-Timestamp + body.
func signDiscord(t *testing.T, cfg verify.Config, body []byte, at time.Time, _ string) (http.Header, string) {
	ed25519Mu.Lock()
	priv, ok := ed25519Keys[cfg.Secrets[0]]
	ed25519Mu.Unlock()
	if !ok {
		t.Fatalf("no private key for %s", cfg.Secrets[0])
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set("X-Signature-Timestamp", ts)
	h.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...))))
	return h, ""
}

// telegramUpdateID is the integer update_id the test gives event id.
func telegramUpdateID(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

// telegramBody is a message Update whose update_id stands for id.
func telegramBody(id string) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":1,"date":1700000000,"chat":{"id":42,"type":"private"},"text":"amount 1000"}}`, telegramUpdateID(id))
}

// signTelegram sends the secret_token as Telegram does.
func signTelegram(_ *testing.T, cfg verify.Config, _ []byte, _ time.Time, _ string) (http.Header, string) {
	h := http.Header{}
	h.Set("X-Telegram-Bot-Api-Secret-Token", cfg.Secrets[0])
	return h, ""
}

// signGitLab sends the secret token and the retry-stable
// Idempotency-Key as GitLab does.
func signGitLab(_ *testing.T, cfg verify.Config, _ []byte, _ time.Time, id string) (http.Header, string) {
	h := http.Header{}
	h.Set("X-Gitlab-Token", cfg.Secrets[0])
	h.Set("X-Gitlab-Event", "Push Hook")
	h.Set("Idempotency-Key", id)
	return h, ""
}

// ecdsaKeys are P-256 key pairs by their base64 DER public key (what
// SendGrid shows), made by sendgridPublicKey.
var (
	ecdsaMu   sync.Mutex
	ecdsaKeys = map[string]*ecdsa.PrivateKey{}
)

func sendgridPublicKey(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := base64.StdEncoding.EncodeToString(der)
	ecdsaMu.Lock()
	ecdsaKeys[pub] = k
	ecdsaMu.Unlock()
	return pub
}

// sendgridBody is an Event Webhook POST: a batch of one event.
func sendgridBody(id string) []byte {
	return fmt.Appendf(nil, `[{"email":"a@example.com","timestamp":1700000000,"event":"delivered","sg_event_id":%q,"sg_message_id":"m1","amount":"1000"}]`, id)
}

// signSendGrid signs as sendgrid-go's eventwebhook verifies: base64 ASN.1
// ECDSA signature of SHA-256(timestamp + body).
func signSendGrid(t *testing.T, cfg verify.Config, body []byte, at time.Time, _ string) (http.Header, string) {
	ecdsaMu.Lock()
	k, ok := ecdsaKeys[cfg.Secrets[0]]
	ecdsaMu.Unlock()
	if !ok {
		t.Fatalf("no private key for %s", cfg.Secrets[0])
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	digest := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
	h.Set("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
	return h, ""
}

// paddleBody is a Paddle Billing notification.
func paddleBody(id string) []byte {
	return fmt.Appendf(nil, `{"event_id":%q,"event_type":"transaction.completed","occurred_at":"2024-01-01T00:00:00Z","notification_id":"ntf_1","data":{"id":"txn_1","total":"1000"}}`, id)
}

// signPaddle signs as developer.paddle.com documents it: Paddle-Signature:
// ts=<unix>;h1=<hex HMAC-SHA256 of "<ts>:<body>">.
func signPaddle(_ *testing.T, cfg verify.Config, body []byte, at time.Time, _ string) (http.Header, string) {
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set("Paddle-Signature", "ts="+ts+";h1="+hex.EncodeToString(hmacSHA256(cfg.Secrets[0], []byte(ts+":"), body)))
	return h, ""
}

// razorpayBody is a Razorpay payment.captured event.
func razorpayBody(id string) []byte {
	// Each event is about its own payment: since issue 23 the same
	// body under a fresh id is answered as a duplicate.
	return fmt.Appendf(nil, `{"entity":"event","account_id":"acc_1","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_%s","amount":1000}}},"created_at":1700000000}`, id)
}

// signRazorpay signs as Razorpay documents it: X-Razorpay-Signature is
// the hex HMAC-SHA256 of the body; X-Razorpay-Event-Id names the event.
func signRazorpay(_ *testing.T, cfg verify.Config, body []byte, _ time.Time, id string) (http.Header, string) {
	h := http.Header{}
	h.Set("X-Razorpay-Signature", hex.EncodeToString(hmacSHA256(cfg.Secrets[0], body)))
	h.Set("X-Razorpay-Event-Id", id)
	return h, ""
}

// linearBody is a Linear Issue create at the current time (its SDK checks
// webhookTimestamp within a minute).
func linearBody(id string) []byte {
	return fmt.Appendf(nil, `{"action":"create","type":"Issue","data":{"id":%q,"title":"amount 1000"},"webhookTimestamp":%d,"webhookId":"wh_1"}`, id, time.Now().UnixMilli())
}

// signLinear signs as Linear's SDK verifies: Linear-Signature is the hex
// HMAC-SHA256 of the body; webhookTimestamp is in the body (at is
// unused: a stale delivery has a stale body).
func signLinear(_ *testing.T, cfg verify.Config, body []byte, _ time.Time, id string) (http.Header, string) {
	h := http.Header{}
	h.Set("Linear-Signature", hex.EncodeToString(hmacSHA256(cfg.Secrets[0], body)))
	h.Set("Linear-Delivery", id)
	h.Set("Linear-Event", "Issue")
	return h, ""
}

// squareBody is a Square payment.updated event.
func squareBody(id string) []byte {
	return fmt.Appendf(nil, `{"merchant_id":"M1","type":"payment.updated","event_id":%q,"created_at":"2024-01-01T00:00:00Z","data":{"type":"payment","id":"p1","object":{"payment":{"amount_money":{"amount":1000}}}}}`, id)
}

// signSquare signs as Square's SDK verifies: base64 HMAC-SHA256 of the
// notification URL followed by the body.
func signSquare(_ *testing.T, cfg verify.Config, body []byte, _ time.Time, _ string) (http.Header, string) {
	h := http.Header{}
	h.Set("x-square-hmacsha256-signature", base64.StdEncoding.EncodeToString(hmacSHA256(cfg.Secrets[0], []byte(cfg.PublicURL), body)))
	return h, ""
}

// adyenItem is one NotificationRequestItem signed as Adyen's docs
// describe: base64 HMAC-SHA256, with the hex-decoded key, of
// pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success.
func adyenItem(t *testing.T, hexKey, psp, eventCode string, value int) string {
	key, err := hex.DecodeString(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	signed := fmt.Sprintf("%s::ShopAccount:order-%s:%d:EUR:%s:true", psp, psp, value, eventCode)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	return fmt.Sprintf(`{"NotificationRequestItem":{"additionalData":{"hmacSignature":%q},"amount":{"currency":"EUR","value":%d},"eventCode":%q,`+
		`"eventDate":"2024-01-01T00:00:00+01:00","merchantAccountCode":"ShopAccount","merchantReference":"order-%s","pspReference":%q,"success":"true"}}`,
		sig, value, eventCode, psp, psp)
}

// TestAdyenBatches posts Adyen notifications through the real gateway:
// one POST is one event (id: the body's SHA-256), each item verified
// under either key; Adyen's retry of the same batch records nothing new;
// a batch with one forged item is refused whole and records nothing.
func TestAdyenBatches(t *testing.T) {
	t.Parallel()
	const current, rotated = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056", "0A1B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F60718293A4B5C6D7E8F9"
	dest := newDestination(t)
	cfg := verify.Config{Scheme: verify.SchemeAdyen, Secrets: []string{current, rotated}}
	p := pipelinetest.Start(t, pipelinetest.Options{Sources: []pipelinetest.SourceSpec{{Name: "adyen", Verify: cfg, Destinations: map[string]string{"app": dest.URL}}}})
	batch := func(items ...string) []byte {
		return []byte(`{"live":"false","notificationItems":[` + strings.Join(items, ",") + `]}`)
	}
	count := func() int { return p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = 'adyen'`) }

	first := batch(adyenItem(t, current, "PSP1", "AUTHORISATION", 1000), adyenItem(t, current, "PSP2", "AUTHORISATION", 2500))
	for i, body := range [][]byte{first, batch(adyenItem(t, rotated, "PSP3", "CAPTURE", 1000))} {
		code, answer := p.Post(t, "/webhooks/adyen", nil, body)
		recorded := p.Schema.Int(t, `SELECT count(*) FROM events WHERE source = 'adyen' AND external_id = $1`, bodySHA256(body, ""))
		if code != http.StatusOK || string(answer) != "[accepted]" || recorded != 1 {
			t.Fatalf("batch %d: got %d %s (recorded %d), want 200 [accepted] recorded under the body's SHA-256", i+1, code, answer, recorded)
		}
	}
	before := count()
	if code, answer := p.Post(t, "/webhooks/adyen", nil, first); code != http.StatusOK || string(answer) != "[accepted]" || count() != before {
		t.Fatalf("retried batch: got %d %s, want 200 [accepted] recording nothing new", code, answer)
	}
	before = count()
	for name, body := range map[string][]byte{
		"wrong key":          batch(adyenItem(t, strings.Repeat("AB", 32), "PSP4", "AUTHORISATION", 1000)),
		"one forged item":    batch(adyenItem(t, current, "PSP5", "AUTHORISATION", 1000), adyenItem(t, strings.Repeat("AB", 32), "PSP6", "REFUND", 1000)),
		"altered amount":     bytes.Replace(batch(adyenItem(t, current, "PSP7", "AUTHORISATION", 1000)), []byte(`"value":1000`), []byte(`"value":1`), 1),
		"unsigned item":      batch(`{"NotificationRequestItem":{"pspReference":"PSP8","eventCode":"AUTHORISATION"}}`),
		"empty notification": []byte(`{"live":"false","notificationItems":[]}`),
	} {
		code, answer := p.Post(t, "/webhooks/adyen", nil, body)
		if code != http.StatusUnauthorized || !strings.Contains(string(answer), "hmacSignature") {
			t.Errorf("%s: got %d %s, want 401 naming hmacSignature", name, code, answer)
		}
	}
	if after := count(); after != before {
		t.Errorf("refused batches were recorded: %d -> %d rows", before, after)
	}
	pipelinetest.Eventually(t, 15*time.Second, "two deliveries", func() bool { return dest.sink.Stats().Calls >= 2 })
}
