// Package sendertest describes the senders of issue 32 for tests: a
// realistic delivery of each, its configuration with a current and a
// rotated secret, and a signer written from the provider's own
// documentation or SDK, independent of package verify (which it checks).
// Tests of package verify and of the gateway share it.
package sendertest

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// Sender is one sender under test.
type Sender struct {
	// Name is the scheme, and the source's name.
	Name string
	// Config has two secrets: the current one and the rotated one.
	// PublicURL, where the scheme needs one, is PublicURLPlaceholder
	// until the test knows its URL.
	Config verify.Config
	// WrongSecret is a secret of the right form that is not configured.
	WrongSecret string
	// Body is a realistic delivery whose own id (when it has one) is
	// id, holding "1000" somewhere for tampering.
	Body func(id string) []byte
	// Sign signs body as the sender does, with the first of cfg.Secrets,
	// at time at; id fills the sender's delivery id header, if any. It
	// returns the headers and the HTTP method.
	Sign func(t testing.TB, cfg verify.Config, body []byte, at time.Time, id string) http.Header
	// Required are the headers whose absence is refused, the signature
	// first and the timestamp last.
	Required []string
	// Timestamped senders sign a timestamp: stale ones are refused.
	Timestamped bool
	// TokenOnly senders sign nothing (a credential): an altered body
	// passes.
	TokenOnly bool
	// ExpectID and ExpectType are the event id and type the scheme's
	// defaults take from Body(id) signed with id ("" type: none).
	// ExpectID nil means id itself; BodySHA256 means the body's hash.
	ExpectID   func(body []byte, id string) string
	ExpectType string
	// Malformed are header values in the wrong format.
	Malformed [][2]string
}

// PublicURLPlaceholder stands for the URL the sender posts to.
const PublicURLPlaceholder = "https://hooks.example.com/webhooks/"

// BodySHA256 is the hex SHA-256 of the body (body-sha256 ids).
func BodySHA256(body []byte, _ string) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

func mac(h func() hash.Hash, key string, parts ...string) []byte {
	m := hmac.New(h, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
func b64(b []byte) string   { return base64.StdEncoding.EncodeToString(b) }

// header builds an http.Header from name, value pairs.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func unix(at time.Time) string   { return strconv.FormatInt(at.Unix(), 10) }
func unixMS(at time.Time) string { return strconv.FormatInt(at.UnixMilli(), 10) }

// bodyOnly is a sender that puts one HMAC of the body in one header.
func bodyOnly(h func() hash.Hash, name, prefix string, enc func([]byte) string) func(testing.TB, verify.Config, []byte, time.Time, string) http.Header {
	return func(_ testing.TB, cfg verify.Config, body []byte, _ time.Time, _ string) http.Header {
		return header(name, prefix+enc(mac(h, cfg.Secrets[0], string(body))))
	}
}

// NumericID is the number standing for id where a sender's ids are
// numbers (HubSpot's eventId).
func NumericID(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

// Ed25519Public returns the base64 public key (as Telnyx's portal shows
// it) of a deterministic key named name.
func Ed25519Public(name string) string {
	return b64(Ed25519Private(name).Public().(ed25519.PublicKey))
}

// Ed25519Private is the private key of a deterministic key named name.
func Ed25519Private(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// ed25519Names names the keys Senders uses, by public key.
var ed25519Names = map[string]string{
	Ed25519Public("telnyx-current"): "telnyx-current",
	Ed25519Public("telnyx-rotated"): "telnyx-rotated",
	Ed25519Public("telnyx-wrong"):   "telnyx-wrong",
}

// Ed25519Key returns the private key of one of Senders' public keys.
func Ed25519Key(pub string) (ed25519.PrivateKey, bool) {
	name, ok := ed25519Names[pub]
	if !ok {
		return nil, false
	}
	return Ed25519Private(name), true
}

// mandrillSignature is Mandrill's: base64 HMAC-SHA1 of the URL and each
// POST parameter's name and value, sorted by name.
func mandrillSignature(key, u string, body []byte) string {
	form, _ := url.ParseQuery(string(body))
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	signed := u
	for _, k := range names {
		for _, v := range form[k] {
			signed += k + v
		}
	}
	return b64(mac(sha1.New, key, signed))
}

// netlifyJWS is the token Netlify sends: HS256 over the claims
// {"iss":"netlify","sha256":<hex SHA-256 of the body>}.
func netlifyJWS(key string, body []byte) string {
	sum := sha256.Sum256(body)
	claims, _ := json.Marshal(map[string]string{"iss": "netlify", "sha256": hex.EncodeToString(sum[:])})
	enc := base64.RawURLEncoding.EncodeToString
	input := enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc(claims)
	return input + "." + enc(mac(sha256.New, key, input))
}

// contentfulSign signs as node-apps-toolkit's signRequest: method, path,
// "name:value" of the signed headers sorted and joined by ";", body.
func contentfulSign(key, path string, body []byte, ts string) http.Header {
	signed := "x-contentful-signed-headers,x-contentful-timestamp"
	canonical := strings.Join([]string{"POST", path, "x-contentful-signed-headers:" + signed + ";x-contentful-timestamp:" + ts, string(body)}, "\n")
	return header("X-Contentful-Signature", hexOf(mac(sha256.New, key, canonical)), "X-Contentful-Signed-Headers", signed,
		"X-Contentful-Timestamp", ts, "X-Contentful-Topic", "ContentManagement.Entry.publish")
}

// standardSign signs as Standard Webhooks: v1,<base64 HMAC-SHA256 of
// "id.timestamp.body"> under key.
func standardSign(key []byte, body []byte, at time.Time, id string) http.Header {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + unix(at) + "." + string(body)))
	return header("webhook-id", id, "webhook-timestamp", unix(at), "webhook-signature", "v1,"+b64(m.Sum(nil)))
}

func whsecKey(s string) []byte {
	k, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	return k
}

var hex64 = strings.Repeat("ab", 32)

// Senders returns every sender of issue 32 but sns (sns_test.go has its
// own certificates) and asana's handshake (its secret here is
// configured).
func Senders() []Sender {
	js := func(format string) func(string) []byte {
		return func(id string) []byte { return fmt.Appendf(nil, format, id) }
	}
	fixed := func(body string) func(string) []byte { return func(string) []byte { return []byte(body) } }
	return []Sender{
		{
			// hubspot-api-nodejs Signature.getSignature v3: base64
			// HMAC-SHA256 of method + url + body + timestamp (ms).
			Name: verify.SchemeHubSpot, Config: cfg(verify.SchemeHubSpot, "hs-client-secret", "hs-rotated-secret", true), WrongSecret: "hs-wrong",
			Body: func(id string) []byte {
				return fmt.Appendf(nil, `[{"eventId":%d,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":1000,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`, NumericID(id))
			},
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := unixMS(at)
				return header("X-HubSpot-Signature-v3", b64(mac(sha256.New, c.Secrets[0], "POST"+c.PublicURL+string(body)+ts)), "X-HubSpot-Request-Timestamp", ts)
			},
			Required: []string{"X-HubSpot-Signature-v3", "X-HubSpot-Request-Timestamp"}, Timestamped: true, ExpectType: "contact.creation",
			ExpectID:  func(_ []byte, id string) string { return strconv.FormatUint(uint64(NumericID(id)), 10) },
			Malformed: [][2]string{{"X-HubSpot-Signature-v3", hex64}, {"X-HubSpot-Request-Timestamp", "1.7e12"}},
		},
		{
			// DocuSign Connect HMAC: X-DocuSign-Signature-1, base64
			// HMAC-SHA256 of the body.
			Name: verify.SchemeDocuSign, Config: cfg(verify.SchemeDocuSign, "ds-key-1", "ds-key-2", false), WrongSecret: "ds-wrong",
			Body:     js(`{"event":"envelope-completed","apiVersion":"v2.1","uri":"/restapi/v2.1/accounts/a1/envelopes/%s","retryCount":0,"configurationId":1000,"generatedDateTime":"2024-01-01T00:00:00.0000000Z","data":{"accountId":"a1","envelopeId":"e1"}}`),
			Sign:     bodyOnly(sha256.New, "X-DocuSign-Signature-1", "", b64),
			Required: []string{"X-DocuSign-Signature-1"}, ExpectID: BodySHA256, ExpectType: "envelope-completed",
			Malformed: [][2]string{{"X-DocuSign-Signature-1", hex64}},
		},
		{
			Name: verify.SchemeTypeform, Config: cfg(verify.SchemeTypeform, "tf-secret", "tf-rotated", false), WrongSecret: "tf-wrong",
			Body:     js(`{"event_id":%q,"event_type":"form_response","form_response":{"form_id":"lT4Z3j","token":"a3a12ec67a1365927098a606107fac15","answers":[{"type":"number","number":1000}]}}`),
			Sign:     bodyOnly(sha256.New, "Typeform-Signature", "sha256=", b64),
			Required: []string{"Typeform-Signature"}, ExpectType: "form_response",
			Malformed: [][2]string{{"Typeform-Signature", "sha256=" + hex64}, {"Typeform-Signature", b64(make([]byte, 32))}},
		},
		{
			Name: verify.SchemeAlchemy, Config: cfg(verify.SchemeAlchemy, "whsec_alchemy_1", "whsec_alchemy_2", false), WrongSecret: "whsec_wrong",
			Body:     js(`{"webhookId":"wh_octjglnywaupz6th","id":%q,"createdAt":"2022-02-28T17:48:53.306Z","type":"ADDRESS_ACTIVITY","event":{"network":"MATIC_MAINNET","activity":[{"value":1000}]}}`),
			Sign:     bodyOnly(sha256.New, "X-Alchemy-Signature", "", hexOf),
			Required: []string{"X-Alchemy-Signature"}, ExpectType: "ADDRESS_ACTIVITY",
			Malformed: [][2]string{{"X-Alchemy-Signature", "sha256=" + hex64}},
		},
		{
			Name: verify.SchemeCoinbase, Config: cfg(verify.SchemeCoinbase, "cb-shared-secret", "cb-rotated", false), WrongSecret: "cb-wrong",
			Body:     js(`{"attempt_number":1,"event":{"api_version":"2018-03-22","id":%q,"type":"charge:created","data":{"code":"66BEOV2A","pricing":{"local":{"amount":"1000"}}}},"id":"f6a5b8b2-delivery","scheduled_for":"2017-01-31T20:50:02Z"}`),
			Sign:     bodyOnly(sha256.New, "X-CC-Webhook-Signature", "", hexOf),
			Required: []string{"X-CC-Webhook-Signature"}, ExpectType: "charge:created",
			Malformed: [][2]string{{"X-CC-Webhook-Signature", hex64[:40]}},
		},
		{
			Name: verify.SchemeXero, Config: cfg(verify.SchemeXero, "xero-webhook-key", "xero-rotated-key", false), WrongSecret: "xero-wrong",
			Body:     js(`{"events":[{"resourceUrl":"https://api.xero.com/api.xro/2.0/Contacts/%s","resourceId":"717f2bfc","eventDateUtc":"2017-06-21T01:15:39.902","eventType":"UPDATE","eventCategory":"CONTACT","tenantId":"c2cc9b6e-9458-4c7d-93cc-f02b81b0594f","tenantType":"ORGANISATION"}],"firstEventSequence":1000,"lastEventSequence":1000,"entropy":"S0m3r4Nd0mt3xt"}`),
			Sign:     bodyOnly(sha256.New, "x-xero-signature", "", b64),
			Required: []string{"X-Xero-Signature"}, ExpectID: BodySHA256, ExpectType: "UPDATE",
			Malformed: [][2]string{{"X-Xero-Signature", hex64}},
		},
		{
			// X-Zendesk-Webhook-Signature: base64 HMAC-SHA256 of the
			// timestamp (RFC 3339) and the body.
			Name: verify.SchemeZendesk, Config: cfg(verify.SchemeZendesk, "zd-signing-secret", "zd-rotated", false), WrongSecret: "zd-wrong",
			Body: js(`{"account_id":22129848,"detail":{"id":"35436","priority":"1000"},"event":{},"id":%q,"subject":"zen:ticket:35436","time":"2021-10-26T18:53:58.616246984Z","type":"zen:event-type:ticket.created","zendesk_event_version":"2022-06-20"}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := at.UTC().Format(time.RFC3339)
				return header("X-Zendesk-Webhook-Signature", b64(mac(sha256.New, c.Secrets[0], ts+string(body))), "X-Zendesk-Webhook-Signature-Timestamp", ts)
			},
			Required: []string{"X-Zendesk-Webhook-Signature", "X-Zendesk-Webhook-Signature-Timestamp"}, Timestamped: true, ExpectType: "zen:event-type:ticket.created",
			Malformed: [][2]string{{"X-Zendesk-Webhook-Signature-Timestamp", "yesterday"}},
		},
		{
			// x-signature: hex HMAC-SHA256 of x-timestamp (ms) + body.
			Name: verify.SchemeAirwallex, Config: cfg(verify.SchemeAirwallex, "awx-secret", "awx-rotated", false), WrongSecret: "awx-wrong",
			Body: js(`{"id":%q,"name":"payment_intent.succeeded","account_id":"acct_1","data":{"object":{"id":"int_1","amount":1000}},"created_at":"2024-01-01T00:00:00+0000"}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := unixMS(at)
				return header("x-signature", hexOf(mac(sha256.New, c.Secrets[0], ts+string(body))), "x-timestamp", ts)
			},
			Required: []string{"X-Signature", "X-Timestamp"}, Timestamped: true, ExpectType: "payment_intent.succeeded",
			Malformed: [][2]string{{"X-Timestamp", "-5"}},
		},
		{
			// orb-go webhook.go: v1=<hex> of "v1:<X-Orb-Timestamp>:<body>".
			Name: verify.SchemeOrb, Config: cfg(verify.SchemeOrb, "c-UGKYdnhHh436B_sMouYAPUvXyWpzOdunZBV5dFSD8", "orb-rotated", false), WrongSecret: "orb-wrong",
			Body: js(`{"id": %q, "created_at": "2024-03-27T15:42:29+00:00", "type": "resource_event.test", "properties": {"message": "amount 1000"}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := at.UTC().Format("2006-01-02T15:04:05.999")
				return header("X-Orb-Signature", "v1="+hexOf(mac(sha256.New, c.Secrets[0], "v1:"+ts+":"+string(body))), "X-Orb-Timestamp", ts)
			},
			Required: []string{"X-Orb-Signature", "X-Orb-Timestamp"}, Timestamped: true, ExpectType: "resource_event.test",
			Malformed: [][2]string{{"X-Orb-Signature", hex64}, {"X-Orb-Timestamp", "1700000000"}},
		},
		{
			// TikTok-Signature: t=<unix>,s=<hex HMAC-SHA256 of "t.body">.
			Name: verify.SchemeTikTok, Config: cfg(verify.SchemeTikTok, "tt-client-secret", "tt-rotated", false), WrongSecret: "tt-wrong",
			Body: js(`{"client_key":"bwo2m45353a6k85","event":"authorization.removed","create_time":1615338610,"user_openid":%q,"content":"{\"reason\": 1000}"}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := unix(at)
				return header("TikTok-Signature", "t="+ts+",s="+hexOf(mac(sha256.New, c.Secrets[0], ts+"."+string(body))))
			},
			Required: []string{"TikTok-Signature"}, Timestamped: true, ExpectID: BodySHA256, ExpectType: "authorization.removed",
			Malformed: [][2]string{{"TikTok-Signature", "s=" + hex64}, {"TikTok-Signature", "t=1700000000"}},
		},
		{
			// Ed25519 of "timestamp|body", base64.
			Name:   verify.SchemeTelnyx,
			Config: verify.Config{Scheme: verify.SchemeTelnyx, Secrets: []string{Ed25519Public("telnyx-current"), Ed25519Public("telnyx-rotated")}}, WrongSecret: Ed25519Public("telnyx-wrong"),
			Body: js(`{"data":{"event_type":"message.received","id":%q,"occurred_at":"2024-01-01T00:00:00.000+00:00","payload":{"text":"amount 1000"},"record_type":"event"},"meta":{"attempt":1,"delivered_to":"https://example.com/webhooks"}}`),
			Sign: func(t testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				priv, ok := Ed25519Key(c.Secrets[0])
				if !ok {
					t.Fatalf("no private key for %s", c.Secrets[0])
				}
				ts := unix(at)
				return header("telnyx-signature-ed25519", b64(ed25519.Sign(priv, []byte(ts+"|"+string(body)))), "telnyx-timestamp", ts)
			},
			Required: []string{"Telnyx-Signature-Ed25519", "Telnyx-Timestamp"}, Timestamped: true, ExpectType: "message.received",
			Malformed: [][2]string{{"Telnyx-Signature-Ed25519", hex64}},
		},
		{
			Name: verify.SchemeIntercom, Config: cfg(verify.SchemeIntercom, "ic-client-secret", "ic-rotated", false), WrongSecret: "ic-wrong",
			Body:     js(`{"type":"notification_event","app_id":"ecahpwf5","data":{"type":"notification_event_data","item":{"type":"ping","message":"amount 1000"}},"links":{},"id":%q,"topic":"ping","delivery_status":null,"delivery_attempts":1,"delivered_at":0,"first_sent_at":1403181389,"created_at":1403181389,"self":null}`),
			Sign:     bodyOnly(sha1.New, "X-Hub-Signature", "sha1=", hexOf),
			Required: []string{"X-Hub-Signature"}, ExpectType: "ping",
			Malformed: [][2]string{{"X-Hub-Signature", "sha256=" + hex64}},
		},
		{
			Name: verify.SchemeMailchimp, Config: cfg(verify.SchemeMailchimp, "mandrill-webhook-key", "mandrill-rotated", true), WrongSecret: "mandrill-wrong",
			Body: func(id string) []byte {
				return []byte(url.Values{"mandrill_events": {fmt.Sprintf(`[{"event":"send","_id":%q,"ts":1700000000,"msg":{"subject":"amount 1000"}}]`, id)}}.Encode())
			},
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, _ string) http.Header {
				return header("X-Mandrill-Signature", mandrillSignature(c.Secrets[0], c.PublicURL, body), "Content-Type", "application/x-www-form-urlencoded")
			},
			Required: []string{"X-Mandrill-Signature"}, ExpectID: BodySHA256,
			Malformed: [][2]string{{"X-Mandrill-Signature", hex64}},
		},
		{
			Name: verify.SchemeX, Config: cfg(verify.SchemeX, "x-consumer-secret", "x-rotated", false), WrongSecret: "x-wrong",
			Body:     js(`{"for_user_id":"2244994945","tweet_create_events":[{"id_str":%q,"text":"amount 1000"}]}`),
			Sign:     bodyOnly(sha256.New, "x-twitter-webhooks-signature", "sha256=", b64),
			Required: []string{"X-Twitter-Webhooks-Signature"}, ExpectID: BodySHA256,
			Malformed: [][2]string{{"X-Twitter-Webhooks-Signature", "sha256=" + hex64}},
		},
		{
			// Twitch: sha256=<hex HMAC of message id + timestamp + body>.
			Name: verify.SchemeTwitch, Config: cfg(verify.SchemeTwitch, "twitch-secret-current", "twitch-secret-rotated", false), WrongSecret: "twitch-secret-wrong",
			Body: fixed(`{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"channel.follow","version":"2","status":"enabled","cost":0,"condition":{"broadcaster_user_id":"1000"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"},"event":{"user_id":"1234","user_login":"cool_user","followed_at":"2020-07-15T18:16:11.17106713Z"}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, id string) http.Header {
				ts := at.UTC().Format(time.RFC3339Nano)
				return header("Twitch-Eventsub-Message-Id", id, "Twitch-Eventsub-Message-Timestamp", ts, "Twitch-Eventsub-Message-Type", "notification",
					"Twitch-Eventsub-Subscription-Type", "channel.follow", "Twitch-Eventsub-Subscription-Version", "2",
					"Twitch-Eventsub-Message-Signature", "sha256="+hexOf(mac(sha256.New, c.Secrets[0], id+ts+string(body))))
			},
			Required:    []string{"Twitch-Eventsub-Message-Signature", "Twitch-Eventsub-Message-Id", "Twitch-Eventsub-Message-Timestamp"},
			Timestamped: true, ExpectType: "channel.follow",
			Malformed: [][2]string{{"Twitch-Eventsub-Message-Signature", hex64}, {"Twitch-Eventsub-Message-Timestamp", "1700000000"}},
		},
		{
			Name: verify.SchemeAsana, Config: cfg(verify.SchemeAsana, "asana-hook-secret", "asana-rotated", false), WrongSecret: "asana-wrong",
			Body:     js(`{"events":[{"action":"changed","resource":{"gid":%q,"resource_type":"task"},"parent":null,"created_at":"2024-01-01T00:00:00.000Z","change":{"field":"notes","new_value":"amount 1000"}}]}`),
			Sign:     bodyOnly(sha256.New, "X-Hook-Signature", "", hexOf),
			Required: []string{"X-Hook-Signature"}, ExpectID: BodySHA256, ExpectType: "changed",
			Malformed: [][2]string{{"X-Hook-Signature", hex64[:20]}},
		},
		{
			Name: verify.SchemeDropbox, Config: cfg(verify.SchemeDropbox, "dbx-app-secret", "dbx-rotated", false), WrongSecret: "dbx-wrong",
			Body:     js(`{"list_folder":{"accounts":["dbid:%s"]},"delta":{"users":[1000]}}`),
			Sign:     bodyOnly(sha256.New, "X-Dropbox-Signature", "", hexOf),
			Required: []string{"X-Dropbox-Signature"}, ExpectID: BodySHA256,
			Malformed: [][2]string{{"X-Dropbox-Signature", "sha256=" + hex64}},
		},
		{
			// X-Trello-Webhook: base64 HMAC-SHA1 of body + callback URL.
			Name: verify.SchemeTrello, Config: cfg(verify.SchemeTrello, "trello-app-secret", "trello-rotated", true), WrongSecret: "trello-wrong",
			Body: js(`{"action":{"id":%q,"idMemberCreator":"4fc78a59a885233f4b349bd9","data":{"card":{"id":"c1","name":"amount 1000"}},"type":"updateCard","date":"2013-07-31T16:58:51.949Z"},"model":{"id":"4d5ea62fd76aa1136000000c"}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, _ string) http.Header {
				return header("X-Trello-Webhook", b64(mac(sha1.New, c.Secrets[0], string(body)+c.PublicURL)))
			},
			Required: []string{"X-Trello-Webhook"}, ExpectType: "updateCard",
			Malformed: [][2]string{{"X-Trello-Webhook", hex64}},
		},
		{
			Name: verify.SchemeBitbucket, Config: cfg(verify.SchemeBitbucket, "bb-secret", "bb-rotated", false), WrongSecret: "bb-wrong",
			Body: fixed(`{"actor":{"display_name":"Ann"},"repository":{"full_name":"team/repo"},"push":{"changes":[{"new":{"name":"main","target":{"hash":"1000"}}}]}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, id string) http.Header {
				return header("X-Hub-Signature", "sha256="+hexOf(mac(sha256.New, c.Secrets[0], string(body))), "X-Request-UUID", id, "X-Event-Key", "repo:push")
			},
			Required: []string{"X-Hub-Signature"}, ExpectType: "repo:push",
			Malformed: [][2]string{{"X-Hub-Signature", "sha1=" + hex64[:40]}},
		},
		{
			Name: verify.SchemeJira, Config: cfg(verify.SchemeJira, "jira-secret", "jira-rotated", false), WrongSecret: "jira-wrong",
			Body: fixed(`{"timestamp":1700000000000,"webhookEvent":"jira:issue_updated","issue":{"id":"10002","key":"ED-1","fields":{"summary":"amount 1000"}}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, id string) http.Header {
				return header("X-Hub-Signature", "sha256="+hexOf(mac(sha256.New, c.Secrets[0], string(body))), "X-Atlassian-Webhook-Identifier", id)
			},
			Required: []string{"X-Hub-Signature"}, ExpectType: "jira:issue_updated",
			Malformed: [][2]string{{"X-Hub-Signature", hex64}},
		},
		{
			Name: verify.SchemeWooCommerce, Config: cfg(verify.SchemeWooCommerce, "wc-secret", "wc-rotated", false), WrongSecret: "wc-wrong",
			Body: fixed(`{"id":1042,"status":"processing","currency":"USD","total":"1000.00"}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, id string) http.Header {
				return header("X-WC-Webhook-Signature", b64(mac(sha256.New, c.Secrets[0], string(body))), "X-WC-Webhook-Delivery-ID", id,
					"X-WC-Webhook-Topic", "order.created")
			},
			Required: []string{"X-WC-Webhook-Signature"}, ExpectType: "order.created",
			Malformed: [][2]string{{"X-WC-Webhook-Signature", hex64}},
		},
		{
			Name: verify.SchemeBigCommerce, Config: cfg(verify.SchemeBigCommerce, "Bearer bc-current", "Bearer bc-rotated", false), WrongSecret: "Bearer bc-wrong",
			Body: js(`{"created_at":1561479335,"store_id":"1025646","producer":"stores/abc","scope":"store/order/created","hash":%q,"data":{"type":"order","id":1000}}`),
			Sign: func(_ testing.TB, c verify.Config, _ []byte, _ time.Time, _ string) http.Header {
				return header("Authorization", c.Secrets[0])
			},
			Required: []string{"Authorization"}, TokenOnly: true, ExpectType: "store/order/created",
		},
		{
			// Calendly-Webhook-Signature: t=<unix>,v1=<hex of "t.body">.
			Name: verify.SchemeCalendly, Config: cfg(verify.SchemeCalendly, "cal-signing-key", "cal-rotated", false), WrongSecret: "cal-wrong",
			Body: js(`{"created_at":"2020-11-23T17:51:19.000000Z","created_by":"https://api.calendly.com/users/%s","event":"invitee.created","payload":{"uri":"https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/1000"}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := unix(at)
				return header("Calendly-Webhook-Signature", "t="+ts+",v1="+hexOf(mac(sha256.New, c.Secrets[0], ts+"."+string(body))))
			},
			Required: []string{"Calendly-Webhook-Signature"}, Timestamped: true, ExpectID: BodySHA256, ExpectType: "invitee.created",
			Malformed: [][2]string{{"Calendly-Webhook-Signature", "v1=" + hex64}},
		},
		{
			Name: verify.SchemePagerDuty, Config: cfg(verify.SchemePagerDuty, "pd-secret", "pd-rotated", false), WrongSecret: "pd-wrong",
			Body: js(`{"event":{"id":%q,"event_type":"incident.priority_updated","resource_type":"incident","occurred_at":"2020-10-02T18:45:22.169Z","agent":null,"client":null,"data":{"id":"PGR0VU2","number":1000}}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, _ string) http.Header {
				return header("X-PagerDuty-Signature", "v1="+hexOf(mac(sha256.New, c.Secrets[0], string(body))))
			},
			Required: []string{"X-PagerDuty-Signature"}, ExpectType: "incident.priority_updated",
			Malformed: [][2]string{{"X-PagerDuty-Signature", hex64}, {"X-PagerDuty-Signature", "v1=zz"}},
		},
		{
			Name: verify.SchemeSentry, Config: cfg(verify.SchemeSentry, "sentry-client-secret", "sentry-rotated", false), WrongSecret: "sentry-wrong",
			Body: fixed(`{"action":"created","installation":{"uuid":"a8e5d37a-696c-4c54-adb5-b3f28d64c7de"},"data":{"issue":{"id":"1000"}},"actor":{"type":"application"}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, id string) http.Header {
				return header("Sentry-Hook-Signature", hexOf(mac(sha256.New, c.Secrets[0], string(body))), "Request-ID", id, "Sentry-Hook-Resource", "issue")
			},
			Required: []string{"Sentry-Hook-Signature"}, ExpectType: "issue",
			Malformed: [][2]string{{"Sentry-Hook-Signature", "sha256=" + hex64}},
		},
		{
			Name: verify.SchemeVercel, Config: cfg(verify.SchemeVercel, "vercel-secret", "vercel-rotated", false), WrongSecret: "vercel-wrong",
			Body:     js(`{"id":%q,"type":"deployment.created","createdAt":1700000000000,"payload":{"deployment":{"id":"dpl_1","size":1000}}}`),
			Sign:     bodyOnly(sha1.New, "x-vercel-signature", "", hexOf),
			Required: []string{"X-Vercel-Signature"}, ExpectType: "deployment.created",
			Malformed: [][2]string{{"X-Vercel-Signature", hex64}},
		},
		{
			Name: verify.SchemeNetlify, Config: cfg(verify.SchemeNetlify, "netlify-jws-secret", "netlify-rotated", false), WrongSecret: "netlify-wrong",
			Body: js(`{"id":%q,"site_id":"s1","build_id":"b1","state":"ready","name":"my-site","deploy_time":1000}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, _ time.Time, _ string) http.Header {
				return header("X-Webhook-Signature", netlifyJWS(c.Secrets[0], body))
			},
			Required: []string{"X-Webhook-Signature"}, ExpectID: BodySHA256, ExpectType: "ready",
			Malformed: [][2]string{{"X-Webhook-Signature", "a.b"}, {"X-Webhook-Signature", "eyJhbGciOiJub25lIn0.e30.AAAA"}},
		},
		{
			Name: verify.SchemeSegment, Config: cfg(verify.SchemeSegment, "segment-secret", "segment-rotated", false), WrongSecret: "segment-wrong",
			Body:     js(`{"version":1,"type":"track","userId":"019mr8mf4r","event":"Item Purchased","properties":{"revenue":1000},"messageId":%q,"timestamp":"2015-12-12T19:11:01.249Z"}`),
			Sign:     bodyOnly(sha1.New, "X-Signature", "", hexOf),
			Required: []string{"X-Signature"}, ExpectType: "track",
			Malformed: [][2]string{{"X-Signature", hex64}},
		},
		{
			Name: verify.SchemePostmark, Config: cfg(verify.SchemePostmark, "hook:pm-password", "hook:pm-rotated", false), WrongSecret: "hook:pm-wrong",
			Body: js(`{"RecordType":"Delivery","ServerID":1000,"MessageStream":"outbound","MessageID":%q,"Recipient":"john@example.com","DeliveredAt":"2019-11-05T16:33:54.9070259Z"}`),
			Sign: func(_ testing.TB, c verify.Config, _ []byte, _ time.Time, _ string) http.Header {
				return header("Authorization", "Basic "+b64([]byte(c.Secrets[0])))
			},
			Required: []string{"Authorization"}, TokenOnly: true, ExpectID: BodySHA256, ExpectType: "Delivery",
			Malformed: [][2]string{{"Authorization", "Bearer x"}},
		},
		{
			Name: verify.SchemePipedrive, Config: cfg(verify.SchemePipedrive, "hook:pd-password", "hook:pd-rotated", false), WrongSecret: "hook:pd-wrong",
			Body: js(`{"v":1,"matches_filters":{"current":[]},"meta":{"action":"updated","object":"deal","id":%q},"current":{"id":1,"value":1000},"event":"updated.deal"}`),
			Sign: func(_ testing.TB, c verify.Config, _ []byte, _ time.Time, _ string) http.Header {
				return header("Authorization", "Basic "+b64([]byte(c.Secrets[0])))
			},
			Required: []string{"Authorization"}, TokenOnly: true, ExpectID: BodySHA256, ExpectType: "updated.deal",
			Malformed: [][2]string{{"Authorization", "Basic !!"}},
		},
		standardSender(verify.SchemeClerk, "whsec_Y2xlcmstY3VycmVudC1zZWNyZXQ=", "whsec_Y2xlcmstcm90YXRlZC1zZWNyZXQ=", "whsec_Y2xlcmstd3Jvbmc="),
		standardSender(verify.SchemeResend, "whsec_cmVzZW5kLWN1cnJlbnQ=", "whsec_cmVzZW5kLXJvdGF0ZWQ=", "whsec_cmVzZW5kLXdyb25n"),
		standardSender(verify.SchemePolar, "polar_whs_current_secret", "polar_whs_rotated_secret", "polar_whs_wrong"),
		{
			Name: verify.SchemeLemonSqueezy, Config: cfg(verify.SchemeLemonSqueezy, "ls-signing-secret", "ls-rotated", false), WrongSecret: "ls-wrong",
			Body:     js(`{"meta":{"event_name":"order_created","custom_data":{"customer_id":25},"webhook_id":%q},"data":{"type":"orders","id":"1","attributes":{"total":1000}}}`),
			Sign:     bodyOnly(sha256.New, "X-Signature", "", hexOf),
			Required: []string{"X-Signature"}, ExpectID: BodySHA256, ExpectType: "order_created",
			Malformed: [][2]string{{"X-Signature", "sha256=" + hex64}},
		},
		{
			Name: verify.SchemeCheckout, Config: cfg(verify.SchemeCheckout, "cko-secret", "cko-rotated", false), WrongSecret: "cko-wrong",
			Body:     js(`{"id":%q,"type":"payment_approved","version":"1.0.33","created_on":"2019-08-29T11:55:56Z","data":{"id":"pay_1","amount":1000}}`),
			Sign:     bodyOnly(sha256.New, "Cko-Signature", "", hexOf),
			Required: []string{"Cko-Signature"}, ExpectType: "payment_approved",
			Malformed: [][2]string{{"Cko-Signature", hex64[:10]}},
		},
		{
			Name: verify.SchemeGoCardless, Config: cfg(verify.SchemeGoCardless, "gc-webhook-secret", "gc-rotated", false), WrongSecret: "gc-wrong",
			Body:     js(`{"events":[{"id":%q,"created_at":"2014-08-04T12:00:00.000Z","action":"cancelled","resource_type":"mandates","links":{"mandate":"MD1000"}}],"meta":{"webhook_id":"WB123"}}`),
			Sign:     bodyOnly(sha256.New, "Webhook-Signature", "", hexOf),
			Required: []string{"Webhook-Signature"}, ExpectID: BodySHA256, ExpectType: "cancelled",
			Malformed: [][2]string{{"Webhook-Signature", "v1," + hex64}},
		},
		{
			// recurly-signature: <ms>,<hex of "ms.body">.
			Name: verify.SchemeRecurly, Config: cfg(verify.SchemeRecurly, "recurly-key", "recurly-rotated", false), WrongSecret: "recurly-wrong",
			Body: js(`{"id":%q,"object_type":"account","site_id":"eg3mhmo6qbnl","event_type":"created","event_time":"2024-01-01T00:00:00Z","account_code":"1000"}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := unixMS(at)
				return header("recurly-signature", ts+","+hexOf(mac(sha256.New, c.Secrets[0], ts+"."+string(body))))
			},
			Required: []string{"Recurly-Signature"}, Timestamped: true, ExpectType: "created",
			Malformed: [][2]string{{"Recurly-Signature", hex64}, {"Recurly-Signature", "soon," + hex64}},
		},
		{
			// x-webflow-signature: hex of "<ms>:<body>".
			Name: verify.SchemeWebflow, Config: cfg(verify.SchemeWebflow, "wf-secret", "wf-rotated", false), WrongSecret: "wf-wrong",
			Body: js(`{"triggerType":"form_submission","payload":{"name":"Contact","id":%q,"data":{"amount":"1000"}}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				ts := unixMS(at)
				return header("x-webflow-signature", hexOf(mac(sha256.New, c.Secrets[0], ts+":"+string(body))), "x-webflow-timestamp", ts)
			},
			Required: []string{"X-Webflow-Signature", "X-Webflow-Timestamp"}, Timestamped: true, ExpectID: BodySHA256, ExpectType: "form_submission",
			Malformed: [][2]string{{"X-Webflow-Timestamp", "now"}},
		},
		{
			Name: verify.SchemeContentful, Config: cfg(verify.SchemeContentful, "cf-secret-0123456789", "cf-rotated-0123456789", true), WrongSecret: "cf-wrong",
			Body: js(`{"sys":{"id":%q,"type":"Entry","version":3},"fields":{"title":{"en-US":"amount 1000"}}}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, _ string) http.Header {
				u, _ := url.Parse(c.PublicURL)
				return contentfulSign(c.Secrets[0], u.Path, body, unixMS(at))
			},
			Required: []string{"X-Contentful-Signature", "X-Contentful-Signed-Headers", "X-Contentful-Timestamp"}, Timestamped: true,
			ExpectID: BodySHA256, ExpectType: "ContentManagement.Entry.publish",
			Malformed: [][2]string{{"X-Contentful-Signed-Headers", "x-contentful-timestamp"}},
		},
		{
			// webhook-toolkit: t=<ms>,v1=<base64url of "t.body">.
			Name: verify.SchemeSanity, Config: cfg(verify.SchemeSanity, "sanity-secret", "sanity-rotated", false), WrongSecret: "sanity-wrong",
			Body: fixed(`{"_id":"resume","_type":"post","title":"amount 1000"}`),
			Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, id string) http.Header {
				ts := unixMS(at)
				return header("sanity-webhook-signature", "t="+ts+",v1="+base64.RawURLEncoding.EncodeToString(mac(sha256.New, c.Secrets[0], ts+"."+string(body))),
					"idempotency-key", id, "sanity-operation", "update")
			},
			Required: []string{"Sanity-Webhook-Signature"}, Timestamped: true, ExpectType: "update",
			Malformed: [][2]string{{"Sanity-Webhook-Signature", "t=1,v1=" + hex64}},
		},
		{
			Name: verify.SchemeCal, Config: cfg(verify.SchemeCal, "cal-secret", "cal-rotated", false), WrongSecret: "cal-wrong",
			Body:     js(`{"triggerEvent":"BOOKING_CREATED","createdAt":"2023-05-24T09:30:00.538Z","payload":{"uid":%q,"price":1000}}`),
			Sign:     bodyOnly(sha256.New, "X-Cal-Signature-256", "", hexOf),
			Required: []string{"X-Cal-Signature-256"}, ExpectID: BodySHA256, ExpectType: "BOOKING_CREATED",
			Malformed: [][2]string{{"X-Cal-Signature-256", "sha256=" + hex64}},
		},
	}
}

func cfg(scheme, current, rotated string, publicURL bool) verify.Config {
	c := verify.Config{Scheme: scheme, Secrets: []string{current, rotated}}
	if publicURL {
		c.PublicURL = PublicURLPlaceholder + scheme
	}
	return c
}

// standardSender is a Standard Webhooks sender by name. Polar's secret
// is the key's bytes (its SDK base64-encodes it for standardwebhooks).
func standardSender(scheme, current, rotated, wrong string) Sender {
	return Sender{
		Name: scheme, Config: cfg(scheme, current, rotated, false), WrongSecret: wrong,
		Body: func(string) []byte {
			return []byte(`{"data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC","amount":1000},"object":"event","type":"user.created"}`)
		},
		Sign: func(_ testing.TB, c verify.Config, body []byte, at time.Time, id string) http.Header {
			key := whsecKey(c.Secrets[0])
			if scheme == verify.SchemePolar {
				key = []byte(c.Secrets[0])
			}
			return standardSign(key, body, at, id)
		},
		Required: []string{"Webhook-Signature", "Webhook-Id", "Webhook-Timestamp"}, Timestamped: true, ExpectType: "user.created",
		Malformed: [][2]string{{"Webhook-Signature", "v1"}},
	}
}
