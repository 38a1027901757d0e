package verify

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

// The senders of issue 32. Most are presets of the generic HMAC
// (hmacPresets): a header, a hash, an encoding and a signed-content
// template. The others are small files of their own: sns (certificates),
// telnyx (Ed25519), netlify (a JWS), asana (a secret learned in its
// handshake), mailchimp (Mandrill's form signature), contentful (a
// canonical request), recurly (its own list), and the senders that sign
// nothing but send a credential (postmark, pipedrive, bigcommerce).
// clerk, resend and polar are Standard Webhooks senders by name.
const (
	SchemeHubSpot      = "hubspot"
	SchemeDocuSign     = "docusign"
	SchemeTypeform     = "typeform"
	SchemeAlchemy      = "alchemy"
	SchemeCoinbase     = "coinbase"
	SchemeXero         = "xero"
	SchemeZendesk      = "zendesk"
	SchemeAirwallex    = "airwallex"
	SchemeOrb          = "orb"
	SchemeTikTok       = "tiktok"
	SchemeTelnyx       = "telnyx"
	SchemeIntercom     = "intercom"
	SchemeMailchimp    = "mailchimp"
	SchemeX            = "x"
	SchemeSNS          = "sns"
	SchemeTwitch       = "twitch"
	SchemeAsana        = "asana"
	SchemeDropbox      = "dropbox"
	SchemeTrello       = "trello"
	SchemeBitbucket    = "bitbucket"
	SchemeJira         = "jira"
	SchemeWooCommerce  = "woocommerce"
	SchemeBigCommerce  = "bigcommerce"
	SchemeCalendly     = "calendly"
	SchemePagerDuty    = "pagerduty"
	SchemeSentry       = "sentry"
	SchemeVercel       = "vercel"
	SchemeNetlify      = "netlify"
	SchemeSegment      = "segment"
	SchemePostmark     = "postmark"
	SchemePipedrive    = "pipedrive"
	SchemeClerk        = "clerk"
	SchemeResend       = "resend"
	SchemePolar        = "polar"
	SchemeLemonSqueezy = "lemonsqueezy"
	SchemeCheckout     = "checkout"
	SchemeGoCardless   = "gocardless"
	SchemeRecurly      = "recurly"
	SchemeWebflow      = "webflow"
	SchemeContentful   = "contentful"
	SchemeSanity       = "sanity"
	SchemeCal          = "cal"
)

var senderSchemes = []string{
	SchemeHubSpot, SchemeDocuSign, SchemeTypeform, SchemeAlchemy, SchemeCoinbase,
	SchemeXero, SchemeZendesk, SchemeAirwallex, SchemeOrb, SchemeTikTok, SchemeTelnyx,
	SchemeIntercom, SchemeMailchimp, SchemeX, SchemeSNS, SchemeTwitch, SchemeAsana,
	SchemeDropbox, SchemeTrello, SchemeBitbucket, SchemeJira, SchemeWooCommerce,
	SchemeBigCommerce, SchemeCalendly, SchemePagerDuty, SchemeSentry, SchemeVercel,
	SchemeNetlify, SchemeSegment, SchemePostmark, SchemePipedrive, SchemeClerk,
	SchemeResend, SchemePolar, SchemeLemonSqueezy, SchemeCheckout, SchemeGoCardless,
	SchemeRecurly, SchemeWebflow, SchemeContentful, SchemeSanity, SchemeCal,
}

// publicURLSchemes sign the URL they post to (Config.PublicURL).
var publicURLSchemes = []string{
	SchemeTwilio, SchemeSquare, SchemeHubSpot, SchemeMailchimp, SchemeTrello, SchemeContentful, SchemeHMAC,
}

// hmacPreset is a sender whose signature is the generic HMAC with fixed
// settings (the keys of Config it would take as hmac), plus what it adds
// on top: its tolerance, what its requests always carry, a handshake.
type hmacPreset struct {
	header, prefix, algorithm, encoding string
	sigKey, tsKey                       string
	tsHeader, tsFormat                  string
	template                            string // "" is {body}
	// numbered: the signatures are in header-1, header-2, …
	numbered bool
	// tolerance is the sender's own window; 0 is DefaultTolerance.
	tolerance time.Duration
	// signHeaders are set on every signed request (sign only).
	signHeaders map[string]string
	// handshake answers the sender's handshake, if it has one.
	handshake func(s *genericScheme, r Request, now time.Time) (Answer, bool, error)
}

// hmacPresets, each confirmed where docs/providers.md says.
var hmacPresets = map[string]hmacPreset{
	// v3: base64 HMAC-SHA256 of method + URI + body + the millisecond
	// timestamp, 5 minutes (hubspot-api-nodejs, Signature.getSignature).
	SchemeHubSpot: {header: "X-HubSpot-Signature-v3", encoding: "base64", tsHeader: "X-HubSpot-Request-Timestamp",
		template: "{method}{url}{body}{timestamp_ms}"},
	// Connect HMAC: one X-DocuSign-Signature-N per active key.
	SchemeDocuSign: {header: "X-DocuSign-Signature", encoding: "base64", numbered: true},
	SchemeTypeform: {header: "Typeform-Signature", prefix: "sha256=", encoding: "base64"},
	SchemeAlchemy:  {header: "X-Alchemy-Signature"},
	SchemeCoinbase: {header: "X-CC-Webhook-Signature"},
	SchemeXero:     {header: "X-Xero-Signature", encoding: "base64", handshake: xeroIntentToReceive},
	SchemeZendesk: {header: "X-Zendesk-Webhook-Signature", encoding: "base64", tsHeader: "X-Zendesk-Webhook-Signature-Timestamp",
		tsFormat: TimestampRFC3339, template: "{timestamp}{body}"},
	SchemeAirwallex: {header: "X-Signature", tsHeader: "X-Timestamp", template: "{timestamp_ms}{body}"},
	// orb-go's webhook.go: v1=<hex> of "v1:<X-Orb-Timestamp>:<body>".
	SchemeOrb: {header: "X-Orb-Signature", sigKey: "v1", tsHeader: "X-Orb-Timestamp", tsFormat: TimestampRFC3339,
		template: "v1:{timestamp}:{body}"},
	SchemeTikTok:   {header: "TikTok-Signature", sigKey: "s", tsKey: "t", template: "{timestamp}.{body}"},
	SchemeIntercom: {header: "X-Hub-Signature", prefix: "sha1=", algorithm: AlgorithmSHA1},
	SchemeX:        {header: "X-Twitter-Webhooks-Signature", prefix: "sha256=", encoding: "base64", handshake: xCRC},
	// EventSub: sha256=<hex> of message id + timestamp + body; Twitch
	// says to refuse messages older than 10 minutes.
	SchemeTwitch: {header: "Twitch-Eventsub-Message-Signature", prefix: "sha256=", tsHeader: "Twitch-Eventsub-Message-Timestamp",
		tsFormat: TimestampRFC3339, template: "{header:Twitch-Eventsub-Message-Id}{timestamp}{body}", tolerance: 10 * time.Minute,
		signHeaders: map[string]string{twitchTypeHeader: "notification"}, handshake: twitchChallenge},
	SchemeDropbox:     {header: "X-Dropbox-Signature", handshake: dropboxChallenge},
	SchemeTrello:      {header: "X-Trello-Webhook", encoding: "base64", algorithm: AlgorithmSHA1, template: "{body}{url}", handshake: headCheck},
	SchemeBitbucket:   {header: "X-Hub-Signature", prefix: "sha256="},
	SchemeJira:        {header: "X-Hub-Signature", prefix: "sha256="},
	SchemeWooCommerce: {header: "X-WC-Webhook-Signature", encoding: "base64", handshake: wooPing},
	// Calendly's example refuses signatures older than three minutes.
	SchemeCalendly:     {header: "Calendly-Webhook-Signature", sigKey: "v1", tsKey: "t", template: "{timestamp}.{body}", tolerance: 3 * time.Minute},
	SchemePagerDuty:    {header: "X-PagerDuty-Signature", sigKey: "v1"},
	SchemeSentry:       {header: "Sentry-Hook-Signature"},
	SchemeVercel:       {header: "X-Vercel-Signature", algorithm: AlgorithmSHA1},
	SchemeSegment:      {header: "X-Signature", algorithm: AlgorithmSHA1},
	SchemeLemonSqueezy: {header: "X-Signature"},
	SchemeCheckout:     {header: "Cko-Signature"},
	SchemeGoCardless:   {header: "Webhook-Signature"},
	SchemeWebflow:      {header: "X-Webflow-Signature", tsHeader: "X-Webflow-Timestamp", template: "{timestamp_ms}:{body}"},
	// webhook-toolkit: t=<ms>,v1=<base64url> of "<t>.<body>".
	SchemeSanity: {header: "Sanity-Webhook-Signature", sigKey: "v1", tsKey: "t", encoding: "base64url", tsFormat: TimestampUnixMS,
		template: "{timestamp}.{body}"},
	SchemeCal: {header: "X-Cal-Signature-256"},
}

// presetScheme is a preset with its handshake.
type presetScheme struct {
	*genericScheme
	handshakeFunc func(s *genericScheme, r Request, now time.Time) (Answer, bool, error)
}

func (p *presetScheme) handshake(r Request, now time.Time) (Answer, bool, error) {
	if p.handshakeFunc == nil {
		return Answer{}, false, nil
	}
	return p.handshakeFunc(p.genericScheme, r, now)
}

// newHMACSender builds a preset through the generic scheme's own checks.
func newHMACSender(cfg Config, keys [][]byte, tol int64) (scheme, error) {
	p, ok := hmacPresets[cfg.Scheme]
	if !ok {
		return nil, fmt.Errorf("verify.scheme: unknown scheme %q", cfg.Scheme)
	}
	prefix := p.prefix
	g := Config{
		Scheme: cfg.Scheme, Header: p.header, Prefix: &prefix, Algorithm: p.algorithm,
		Encoding: p.encoding, SignatureKey: p.sigKey, TimestampKey: p.tsKey,
		TimestampHeader: p.tsHeader, TimestampFormat: p.tsFormat, SignedContent: p.template,
		PublicURL: cfg.PublicURL,
	}
	if g.Encoding == "" {
		g.Encoding = "hex"
	}
	if g.SignedContent == "" {
		g.SignedContent = "{body}"
	}
	s, err := newGeneric(g, keys, tol)
	if err != nil {
		return nil, err
	}
	gs := s.(*genericScheme)
	if p.numbered {
		for i := 1; i <= maxSignatures; i++ {
			gs.numbered = append(gs.numbered, http.CanonicalHeaderKey(fmt.Sprintf("%s-%d", p.header, i)))
		}
	}
	if len(p.signHeaders) > 0 {
		gs.signHeaders = http.Header{}
		for k, v := range p.signHeaders {
			gs.signHeaders.Set(k, v)
		}
	}
	return &presetScheme{genericScheme: gs, handshakeFunc: p.handshake}, nil
}

// newSender builds the senders that are no HMAC preset.
func newSender(cfg Config, tol int64) (scheme, error) {
	switch cfg.Scheme {
	case SchemeTelnyx:
		return newTelnyx(cfg, tol)
	case SchemeSNS:
		return newSNS(cfg)
	case SchemePostmark, SchemePipedrive:
		return newBasicAuth(cfg.Secrets)
	case SchemeBigCommerce:
		return newBigCommerce(cfg), nil
	case SchemeClerk, SchemeResend, SchemePolar:
		return newStandardSender(cfg, tol)
	case SchemeAsana:
		return newAsana(cfg.Secrets), nil
	case SchemeMailchimp:
		return newMandrill(cfg)
	case SchemeNetlify:
		return newNetlify(cfg.Secrets), nil
	case SchemeContentful:
		return newContentful(cfg, tol)
	case SchemeRecurly:
		return newRecurly(cfg.Secrets, tol), nil
	}
	return nil, fmt.Errorf("verify.scheme: unknown scheme %q", cfg.Scheme)
}

// xeroIntentToReceive answers Xero's "intent to receive": a signed POST
// whose events list is empty, answered 200 with no body once verified
// (a bad signature is refused 401, which Xero also checks).
func xeroIntentToReceive(s *genericScheme, r Request, now time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost || !jsonlimit.Valid(r.Body) {
		return Answer{}, false, nil
	}
	ev := gjson.GetBytes(r.Body, "events")
	if !ev.IsArray() || len(ev.Array()) != 0 {
		return Answer{}, false, nil
	}
	if err := s.Verify(r, now); err != nil {
		return Answer{}, false, err
	}
	return Answer{Status: http.StatusOK}, true, nil
}

// crcToken is what X's CRC tokens look like. Refusing anything else
// keeps the CRC answer, an HMAC of a chosen text under the consumer
// secret, from signing a JSON body (which starts with "{").
var crcToken = regexp.MustCompile(`^[A-Za-z0-9+/=_-]{1,256}$`)

// xCRC answers X's challenge-response check, GET ?crc_token=t, with
// {"response_token":"sha256=<base64 HMAC-SHA256 of t under the consumer
// secret>"} (the first secret: X holds one).
func xCRC(s *genericScheme, r Request, _ time.Time) (Answer, bool, error) {
	if r.Method != http.MethodGet {
		return Answer{}, false, nil
	}
	q, err := url.ParseQuery(r.RawQuery)
	if err != nil || !q.Has("crc_token") {
		return Answer{}, false, nil
	}
	token := q.Get("crc_token")
	if !crcToken.MatchString(token) {
		return Answer{}, false, refused("crc_token", "not a CRC token")
	}
	st := s.macs[0].get()
	st.writeString(token)
	sig := s.encode(st.finish())
	s.macs[0].put(st)
	b, _ := json.Marshal(map[string]string{"response_token": "sha256=" + sig})
	return Answer{Status: http.StatusOK, ContentType: contentTypeJSON, Body: b}, true, nil
}

const twitchTypeHeader = "Twitch-Eventsub-Message-Type"

// twitchChallenge answers EventSub's webhook_callback_verification once
// its signature verified: the body's challenge as text/plain.
func twitchChallenge(s *genericScheme, r Request, now time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost || r.Header.Get(twitchTypeHeader) != "webhook_callback_verification" {
		return Answer{}, false, nil
	}
	if err := s.Verify(r, now); err != nil {
		return Answer{}, false, err
	}
	c := gjson.GetBytes(r.Body, "challenge")
	if !jsonlimit.Valid(r.Body) || c.Type != gjson.String || c.Str == "" {
		return Answer{}, false, refused("challenge", "missing")
	}
	return Answer{Status: http.StatusOK, ContentType: contentTypeText, Body: []byte(c.Str)}, true, nil
}

// dropboxChallenge answers Dropbox's verification request, GET
// ?challenge=c, with c as text/plain (the gateway adds
// X-Content-Type-Options: nosniff, as Dropbox asks).
func dropboxChallenge(_ *genericScheme, r Request, _ time.Time) (Answer, bool, error) {
	if r.Method != http.MethodGet {
		return Answer{}, false, nil
	}
	q, err := url.ParseQuery(r.RawQuery)
	if err != nil || !q.Has("challenge") {
		return Answer{}, false, nil
	}
	c := q.Get("challenge")
	if c == "" {
		return Answer{}, false, refused("challenge", "empty")
	}
	return Answer{Status: http.StatusOK, ContentType: contentTypeText, Body: []byte(c)}, true, nil
}

// headCheck answers the HEAD a sender sends to check the URL exists
// before it saves a webhook (Trello, Mandrill): 200, nothing recorded.
func headCheck(_ *genericScheme, r Request, _ time.Time) (Answer, bool, error) {
	if r.Method != http.MethodHead {
		return Answer{}, false, nil
	}
	return Answer{Status: http.StatusOK}, true, nil
}

// wooPing answers the ping WooCommerce posts when a webhook is saved, a
// form body webhook_id=<n> that it does not sign: 200, nothing recorded.
func wooPing(_ *genericScheme, r Request, _ time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost || !wooPingBody.Match(r.Body) {
		return Answer{}, false, nil
	}
	return Answer{Status: http.StatusOK}, true, nil
}

var wooPingBody = regexp.MustCompile(`^webhook_id=[0-9]{1,20}$`)

// SignsURL reports whether c's signature covers the URL the sender posts
// to (Config.PublicURL): a sender's stand-in (webhookd listen --resign)
// signs the URL it posts to.
func (c Config) SignsURL() bool {
	if c.Scheme == SchemeHMAC || c.Scheme == SchemeHMACSHA256 {
		return strings.Contains(c.SignedContent, "{url}")
	}
	return slices.Contains(publicURLSchemes, c.Scheme)
}

// SignBody returns body as cfg's sender sends it: for the schemes that
// sign inside the body, mailgun (a fresh token) and adyen (each
// notification item), a copy carrying the signature, signed with the
// first secret at now; body itself for the others. Call it before Sign,
// which signs the body it returns.
func SignBody(cfg Config, body []byte, now time.Time) ([]byte, error) {
	if len(cfg.Secrets) == 0 {
		return body, nil
	}
	switch cfg.Scheme {
	case SchemeMailgun:
		var token [16]byte
		_, _ = rand.Read(token[:])
		return MailgunSignBody(body, cfg.Secrets[0], hex.EncodeToString(token[:]), now)
	case SchemeAdyen:
		return AdyenSignBody(body, cfg.Secrets[0])
	}
	return body, nil
}
