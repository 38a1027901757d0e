package verify

import (
	"cmp"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webhookd/webhookd/internal/suggest"
)

// Scheme names accepted in Config.Scheme.
const (
	SchemeStripe     = "stripe"
	SchemeGitHub     = "github"
	SchemeStandard   = "standard"
	SchemeShopify    = "shopify"
	SchemeSlack      = "slack"
	SchemeTwilio     = "twilio"
	SchemeMeta       = "meta"
	SchemeZoom       = "zoom"
	SchemeDiscord    = "discord"
	SchemeTelegram   = "telegram"
	SchemeGitLab     = "gitlab"
	SchemeSendGrid   = "sendgrid"
	SchemeMSGraph    = "msgraph"
	SchemeSquare     = "square"
	SchemePaddle     = "paddle"
	SchemeRazorpay   = "razorpay"
	SchemeLinear     = "linear"
	SchemeMailgun    = "mailgun"
	SchemeAdyen      = "adyen"
	SchemeHMACSHA256 = "hmac-sha256"
	SchemeHMAC       = "hmac"
	SchemeNone       = "none"
)

// Schemes lists every scheme name New accepts, in documentation order:
// the first senders, those of issue 32 (senderSchemes), then the generic
// ones.
var Schemes = slices.Concat([]string{
	SchemeStripe, SchemeGitHub, SchemeStandard, SchemeShopify,
	SchemeSlack, SchemeTwilio, SchemeMeta, SchemeZoom,
	SchemeDiscord, SchemeTelegram, SchemeSendGrid, SchemeMSGraph, SchemeGitLab,
	SchemeMailgun, SchemeSquare, SchemeAdyen, SchemePaddle, SchemeRazorpay, SchemeLinear,
}, senderSchemes, []string{SchemeHMACSHA256, SchemeHMAC, SchemeNone})

// DefaultTolerance is the timestamp tolerance, both ways, used when
// Config.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// MaxTolerance bounds Config.Tolerance: past it the timestamp check no
// longer stops replays of a captured delivery.
const MaxTolerance = 24 * time.Hour

// Errors that Verify wraps. Each failed verification wraps exactly one of
// them, so callers (the gateway's error handler) branch with errors.Is and
// answer 401; the wrapping message names the header, never a secret or the
// expected signature.
var (
	// ErrMissingSignature is returned when a header the scheme requires
	// (signature, timestamp or message id) is absent or empty.
	ErrMissingSignature = errors.New("signature missing")
	// ErrMalformedSignature is returned when a signature or timestamp header
	// is present but not in the scheme's format.
	ErrMalformedSignature = errors.New("signature malformed")
	// ErrSignatureMismatch is returned when the signature is well formed but
	// no configured secret produces it (wrong secret or altered body).
	ErrSignatureMismatch = errors.New("signature mismatch")
	// ErrTimestampOutsideTolerance is returned when the signed timestamp is
	// older, or further in the future, than the tolerance allows.
	ErrTimestampOutsideTolerance = errors.New("timestamp outside tolerance")
	// ErrKeyUnavailable is returned when the key that checks a signature
	// could not be had now (sns: its certificate could not be fetched);
	// the sender should try again later (503).
	ErrKeyUnavailable = errors.New("signing key unavailable")
)

// Config configures one source's verification: the YAML `verify:` block
// of SPEC.md, decoded by the configuration package; error messages use
// the YAML key names.
type Config struct {
	// Scheme is one of Schemes. Required.
	Scheme string `yaml:"scheme"`
	// Secrets are the signing secrets; several while rotating, any may
	// match. Sign uses the first. Required for every scheme but none.
	// standard secrets have the form whsec_<base64>; discord and sendgrid
	// take public keys (hex Ed25519, base64 DER P-256), adyen a hex key;
	// all others are used as given (Twilio: the auth token).
	Secrets []string `yaml:"secrets"`
	// Tolerance is how far a signed timestamp may be from now, both ways.
	// Zero means the sender's own window where it documents one (paddle
	// 5s, linear 1m), else DefaultTolerance (5m). Only used by schemes
	// that sign a timestamp: stripe, standard, slack, zoom, discord,
	// sendgrid, mailgun, paddle, linear, and hmac-sha256 with
	// TimestampHeader.
	Tolerance time.Duration `yaml:"tolerance"`

	// Header is the signature header for hmac and hmac-sha256 (default
	// X-Webhook-Signature), and the token header for bigcommerce
	// (default Authorization).
	Header string `yaml:"header"`
	// Encoding is "hex" (default), "base64" or "base64url" (unpadded),
	// for hmac and hmac-sha256 only.
	Encoding string `yaml:"encoding"`
	// Prefix is put before the encoded signature, for hmac and
	// hmac-sha256 only. nil means "sha256=" (hmac-sha256, or hmac with
	// SHA-256 and no SignatureKey) or "sha1="/"sha512=" by Algorithm; a
	// pointer to "" means no prefix.
	Prefix *string `yaml:"prefix"`
	// Algorithm is the HMAC's hash for hmac: "sha1", "sha256" (default)
	// or "sha512". hmac-sha256 is SHA-256.
	Algorithm string `yaml:"algorithm"`
	// SignatureKey, for hmac only, makes Header a list of k=v pairs
	// separated by "," or ";" ("t=1700000000,v1=…,v1=…"), whose
	// SignatureKey values are signatures: any may match (senders list
	// one per secret while rotating). Prefix is then unused.
	SignatureKey string `yaml:"signature_key"`
	// TimestampKey, for hmac with SignatureKey only, names the signed
	// timestamp's key in that list ("t"), checked against Tolerance.
	TimestampKey string `yaml:"timestamp_key"`
	// TimestampHeader optionally names a header holding the signed
	// timestamp, checked against Tolerance; hmac and hmac-sha256 only.
	// The timestamp must be signed: SignedContent must contain
	// "{timestamp}" (or "{timestamp_ms}").
	TimestampHeader string `yaml:"timestamp_header"`
	// TimestampFormat is how that timestamp reads: "unix" (seconds, the
	// default), "unix_ms" (what {timestamp_ms} implies) or "rfc3339";
	// hmac only.
	TimestampFormat string `yaml:"timestamp_format"`
	// SignedContent is a template for the signed bytes, hmac and
	// hmac-sha256 only: "{body}", "{timestamp}" (the timestamp as
	// received), "{timestamp_ms}" (likewise, in unix milliseconds),
	// "{method}", "{url}" (PublicURL, with the request's query) and
	// "{header:Name}" are replaced, everything else is literal. Defaults
	// to "{timestamp}.{body}" with a timestamp, else "{body}". It must
	// contain "{body}" once; the timestamp is required with
	// TimestampHeader or TimestampKey and refused without.
	SignedContent string `yaml:"signed_content"`

	// PublicURL is the webhook URL as the sender sees it (scheme, host,
	// port, path): required for twilio, square, hubspot, mailchimp,
	// trello, contentful, and hmac with {url}.
	PublicURL string `yaml:"public_url"`

	// SubscriptionConfirmation says what sns does with a verified
	// SubscriptionConfirmation: "confirm" (default: it visits the
	// SubscribeURL, whose host it checks like a certificate's) or "show"
	// (it logs the URL for an operator to visit). sns only.
	SubscriptionConfirmation string `yaml:"subscription_confirmation"`

	// SNS replaces where sns fetches signing certificates and confirms
	// subscriptions from. Not a configuration key: nil (production)
	// means HTTPS to sns.<region>.amazonaws.com only; tests point it at
	// a local server with a test CA.
	SNS *SNSTrust `yaml:"-"`

	// VerifyToken is the token Meta's subscribe handshake carries
	// (hub.verify_token), for meta only, where it is required.
	VerifyToken string `yaml:"verify_token"`

	// SigningKey is the sender's private key, for Sign only, for the
	// schemes whose secrets are public keys (discord: hex Ed25519 seed or
	// private key; sendgrid: base64 DER P-256 key, SEC 1 or PKCS #8).
	// Verify never uses it; it is no configuration key
	// (webhookd send --signing-key).
	SigningKey string `yaml:"-"`

	// AllowUnsigned must be true for scheme none, else New fails. It makes
	// accepting unsigned webhooks an explicit decision.
	AllowUnsigned bool `yaml:"allow_unsigned"`
}

// WithDefaults returns a copy of c with defaults filled in: Tolerance 5m,
// and for hmac-sha256 Header, Encoding, Prefix and SignedContent.
func (c Config) WithDefaults() Config {
	if c.Tolerance == 0 {
		switch c.Scheme {
		case SchemePaddle:
			c.Tolerance = paddleTolerance
		case SchemeLinear:
			c.Tolerance = linearTolerance
		case SchemeContentful:
			c.Tolerance = contentfulTolerance
		default:
			if p, ok := hmacPresets[c.Scheme]; ok && p.tolerance != 0 {
				c.Tolerance = p.tolerance
				break
			}
			c.Tolerance = DefaultTolerance
		}
	}
	if c.Scheme == SchemeHMACSHA256 || c.Scheme == SchemeHMAC {
		if c.Header == "" {
			c.Header = "X-Webhook-Signature"
		}
		if c.Encoding == "" {
			c.Encoding = "hex"
		}
		if c.Prefix == nil {
			p := ""
			if c.SignatureKey == "" {
				p = cmp.Or(c.Algorithm, AlgorithmSHA256) + "="
			}
			c.Prefix = &p
		}
		if c.SignedContent == "" {
			if c.TimestampHeader != "" || c.TimestampKey != "" {
				c.SignedContent = "{timestamp}.{body}"
			} else {
				c.SignedContent = "{body}"
			}
		}
	}
	if c.Scheme == SchemeSNS && c.SubscriptionConfirmation == "" {
		c.SubscriptionConfirmation = SNSConfirm
	}
	if c.Scheme == SchemeBigCommerce && c.Header == "" {
		c.Header = "Authorization"
	}
	return c
}

// Validate reports the first problem with c as an error naming the YAML key
// (for example "verify.secrets: required for scheme stripe"). Error
// messages never contain secret values.
func (c Config) Validate() error {
	_, err := build(c)
	return err
}

// Request is what a Verifier looks at: the received headers, the exact raw
// body and the raw query string.
type Request struct {
	// Method is the HTTP method (handshakes: Meta's subscribe is a GET).
	Method string
	// Header holds the request headers, canonicalized as net/http does.
	Header http.Header
	// Body is the exact raw bytes received.
	Body []byte
	// RawQuery is the request's raw query without "?" (twilio uses it to
	// rebuild the signed URL and to find bodySHA256).
	RawQuery string
}

// Verifier checks one request against a source's configuration.
type Verifier interface {
	// Verify returns nil when r carries a valid signature at time now, and
	// otherwise an error wrapping ErrMissingSignature,
	// ErrMalformedSignature, ErrSignatureMismatch or
	// ErrTimestampOutsideTolerance.
	Verify(r Request, now time.Time) error
}

// contextVerifier is implemented by the schemes whose verification may
// do I/O (sns fetches its signing certificates).
type contextVerifier interface {
	verifyContext(ctx context.Context, r Request, now time.Time) error
}

// VerifyContext is v.Verify for a caller with a context: a scheme whose
// verification does I/O (sns) stops when ctx ends. Besides Verify's
// errors it may return an error wrapping ErrKeyUnavailable.
func VerifyContext(ctx context.Context, v Verifier, r Request, now time.Time) error {
	if c, ok := v.(contextVerifier); ok {
		return c.verifyContext(ctx, r, now)
	}
	return v.Verify(r, now)
}

// scheme is implemented by every scheme: it verifies and it signs.
type scheme interface {
	Verifier
	sign(body []byte, now time.Time, msgID string) (http.Header, string, error)
	// writeSigned writes the bytes a verified request's signature covers,
	// less what the configuration fixes (twilio's URL); false when the
	// scheme signs nothing.
	writeSigned(w io.Writer, r Request) bool
}

// New validates cfg and returns its Verifier, with per-secret state
// (decoded keys, pooled HMAC states) computed once. It returns the error of
// Validate when cfg is invalid.
func New(cfg Config) (Verifier, error) {
	s, err := build(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Sign returns the headers (and, for twilio, the raw query string to send
// the request with) that a sender using cfg's scheme would send for body at
// time now, signed with the first secret. msgID fills the scheme's message
// id header where it has one (webhook-id, required for standard;
// X-GitHub-Delivery, X-Shopify-Webhook-Id and X-Shopify-Event-Id, I-Twilio-Idempotency-Token when
// not empty). For scheme none the header is empty. It returns the error of
// Validate when cfg is invalid.
func Sign(cfg Config, body []byte, now time.Time, msgID string) (header http.Header, rawQuery string, err error) {
	s, err := build(cfg)
	if err != nil {
		return nil, "", err
	}
	return s.sign(body, now, msgID)
}

// Signer signs requests as a sender of its scheme would, with its keys
// decoded and its HMAC states pooled once: build it at configuration time
// and sign every call with it.
type Signer interface {
	// Sign returns the headers (and, for twilio, the raw query string)
	// for body at time now, signed with the first secret, as Sign does.
	Sign(body []byte, now time.Time, msgID string) (header http.Header, rawQuery string, err error)
}

// NewSigner validates cfg and returns its Signer. It returns the error of
// Validate when cfg is invalid.
func NewSigner(cfg Config) (Signer, error) {
	s, err := build(cfg)
	if err != nil {
		return nil, err
	}
	return signer{s}, nil
}

// signer adapts a scheme to Signer.
type signer struct{ s scheme }

func (s signer) Sign(body []byte, now time.Time, msgID string) (http.Header, string, error) {
	return s.s.sign(body, now, msgID)
}

func build(cfg Config) (scheme, error) {
	cfg = cfg.WithDefaults()
	if cfg.Tolerance < 0 {
		return nil, errors.New("verify.tolerance: must not be negative")
	}
	if cfg.Tolerance > MaxTolerance {
		return nil, fmt.Errorf("verify.tolerance: must be at most %s: a longer window lets a captured delivery be replayed for that long", MaxTolerance)
	}
	generic := cfg.Scheme == SchemeHMACSHA256 || cfg.Scheme == SchemeHMAC
	if !generic {
		for _, f := range []struct{ key, val string }{
			{"header", cfg.Header}, {"encoding", cfg.Encoding},
			{"timestamp_header", cfg.TimestampHeader}, {"signed_content", cfg.SignedContent},
		} {
			if f.val != "" && !(f.key == "header" && cfg.Scheme == SchemeBigCommerce) {
				return nil, fmt.Errorf("verify.%s: only used by scheme hmac-sha256, not %s", f.key, cfg.Scheme)
			}
		}
		if cfg.Prefix != nil {
			return nil, fmt.Errorf("verify.prefix: only used by scheme hmac-sha256, not %s", cfg.Scheme)
		}
	}
	if cfg.Scheme != SchemeHMAC {
		for _, f := range []struct{ key, val string }{
			{"algorithm", cfg.Algorithm}, {"signature_key", cfg.SignatureKey},
			{"timestamp_key", cfg.TimestampKey}, {"timestamp_format", cfg.TimestampFormat},
		} {
			if f.val != "" && !(f.key == "algorithm" && cfg.Scheme == SchemeHMACSHA256) {
				return nil, fmt.Errorf("verify.%s: only used by scheme hmac, not %s", f.key, cfg.Scheme)
			}
		}
	}
	if cfg.PublicURL != "" && !slices.Contains(publicURLSchemes, cfg.Scheme) {
		return nil, fmt.Errorf("verify.public_url: only used by schemes %s, not %s", strings.Join(publicURLSchemes, ", "), cfg.Scheme)
	}
	if cfg.Scheme != SchemeSNS && (cfg.SubscriptionConfirmation != "" || cfg.SNS != nil) {
		return nil, fmt.Errorf("verify.subscription_confirmation: only used by scheme sns, not %s", cfg.Scheme)
	}
	if cfg.Scheme != SchemeMeta && cfg.VerifyToken != "" {
		return nil, fmt.Errorf("verify.verify_token: only used by scheme meta, not %s", cfg.Scheme)
	}
	if cfg.Scheme != SchemeNone && cfg.AllowUnsigned {
		return nil, fmt.Errorf("verify.allow_unsigned: only used by scheme none, not %s", cfg.Scheme)
	}
	switch cfg.Scheme {
	case "":
		return nil, errors.New("verify.scheme: required")
	case SchemeNone:
		if !cfg.AllowUnsigned {
			return nil, errors.New("verify.allow_unsigned: must be true for scheme none")
		}
		if len(cfg.Secrets) > 0 {
			return nil, errors.New("verify.secrets: not used by scheme none")
		}
		return noneScheme{}, nil
	default:
		if !slices.Contains(Schemes, cfg.Scheme) {
			return nil, fmt.Errorf("verify.scheme: unknown scheme %q%s (want one of %s)", cfg.Scheme, suggest.DidYouMean(cfg.Scheme, Schemes), strings.Join(Schemes, ", "))
		}
	}
	if len(cfg.Secrets) == 0 && cfg.Scheme != SchemeAsana {
		// Asana's secret arrives in its handshake (asana.go).
		return nil, fmt.Errorf("verify.secrets: required for scheme %s", cfg.Scheme)
	}
	tol := int64(cfg.Tolerance / time.Second)
	for i, s := range cfg.Secrets {
		if s == "" {
			return nil, fmt.Errorf("verify.secrets[%d]: empty", i)
		}
		if strings.TrimSpace(s) != s {
			return nil, fmt.Errorf("verify.secrets[%d]: starts or ends with white space (a copy-and-paste slip?)", i)
		}
	}
	switch cfg.Scheme {
	case SchemeDiscord: // public keys, not shared secrets
		return newDiscord(cfg, tol)
	case SchemeSendGrid:
		return newSendGrid(cfg, tol)
	case SchemeTelegram: // tokens compared, no key
		return newTelegram(cfg.Secrets)
	case SchemeGitLab:
		return newGitLab(cfg.Secrets), nil
	case SchemeMSGraph:
		return &msgraphScheme{states: cfg.Secrets}, nil
	case SchemeAdyen: // hex keys
		return newAdyen(cfg.Secrets)
	case SchemeTelnyx, SchemeSNS, SchemePostmark, SchemePipedrive, SchemeBigCommerce,
		SchemeClerk, SchemeResend, SchemePolar, SchemeAsana, SchemeMailchimp, SchemeNetlify,
		SchemeContentful, SchemeRecurly: // keys, topics, credentials, their own formats
		return newSender(cfg, tol)
	}
	keys := make([][]byte, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		if cfg.Scheme == SchemeStandard {
			k, err := decodeStandardSecret(s)
			if err != nil {
				return nil, fmt.Errorf("verify.secrets[%d]: %w", i, err)
			}
			keys[i] = k
			continue
		}
		keys[i] = []byte(s)
	}
	switch cfg.Scheme {
	case SchemeStripe:
		return &stripeScheme{macs: newMACs(keys, sha256New), tol: tol}, nil
	case SchemeGitHub:
		return &githubScheme{macs: newMACs(keys, sha256New)}, nil
	case SchemeStandard:
		return &standardScheme{macs: newMACs(keys, sha256New), tol: tol}, nil
	case SchemeShopify:
		return &shopifyScheme{macs: newMACs(keys, sha256New)}, nil
	case SchemeSlack:
		return newSlack(keys, tol), nil
	case SchemeTwilio:
		return newTwilio(cfg, keys)
	case SchemeMeta:
		return newMeta(cfg, keys)
	case SchemeZoom:
		return newZoom(keys, tol), nil
	case SchemeSquare:
		return newSquare(cfg, keys)
	case SchemeMailgun:
		return &mailgunScheme{macs: newMACs(keys, sha256New), tol: tol}, nil
	case SchemePaddle:
		return &paddleScheme{macs: newMACs(keys, sha256New), tol: tol}, nil
	case SchemeRazorpay:
		return newRazorpay(keys), nil
	case SchemeLinear:
		return newLinear(keys, cfg.Tolerance), nil
	case SchemeHMACSHA256, SchemeHMAC:
		return newGeneric(cfg, keys, tol)
	default: // the HMAC senders of issue 32
		return newHMACSender(cfg, keys, tol)
	}
}

// mac is one secret's pooled HMAC state. Pooling keeps the verify path
// free of the allocations hmac.New makes.
type mac struct {
	pool sync.Pool // of *macState
}

type macState struct {
	h   hash.Hash
	sum []byte // cap 64, reused by Sum
	buf []byte // scratch for short prefixes (timestamps, ids)
}

func newMACs(keys [][]byte, h func() hash.Hash) []*mac {
	out := make([]*mac, len(keys))
	for i, k := range keys {
		key := k
		out[i] = &mac{pool: sync.Pool{New: func() any {
			return &macState{h: hmac.New(h, key), sum: make([]byte, 0, 64), buf: make([]byte, 0, 64)}
		}}}
	}
	return out
}

func (m *mac) get() *macState {
	st := m.pool.Get().(*macState)
	st.h.Reset()
	return st
}

func (m *mac) put(st *macState) { m.pool.Put(st) }

// signTimestamped returns now as Unix seconds and the hex HMAC of
// "<seconds><sep><body>" under m, what Stripe-like senders sign.
func (m *mac) signTimestamped(now time.Time, sep string, body []byte) (ts, sig string) {
	st := m.get()
	defer m.put(st)
	ts = strconv.FormatInt(now.Unix(), 10)
	st.writeString(ts + sep)
	st.h.Write(body)
	return ts, hex.EncodeToString(st.finish())
}

// firstSigner returns the index of the first of macs (the configured
// secrets, in order) whose HMAC of the prefix parts and then body
// satisfies match, or -1: the loop over rotated secrets the schemes
// share, which build their signed content as a prefix and the body.
func firstSigner(macs []*mac, body []byte, match func(sum []byte) bool, prefix ...string) int {
	for i, m := range macs {
		st := m.get()
		st.buf = st.buf[:0]
		for _, p := range prefix {
			st.buf = append(st.buf, p...)
		}
		st.h.Write(st.buf)
		st.h.Write(body)
		ok := match(st.finish())
		m.put(st)
		if ok {
			return i
		}
	}
	return -1
}

// writeString writes s to the state's hash through its scratch buffer, so
// no string-to-slice conversion allocates.
func (st *macState) writeString(s string) {
	st.buf = append(st.buf[:0], s...)
	st.h.Write(st.buf)
}

func (st *macState) finish() []byte {
	st.sum = st.h.Sum(st.sum[:0])
	return st.sum
}

// checkTimestamp parses a unix-seconds header value and checks it is within
// tol seconds of now, both ways.
func checkTimestamp(header, value string, now time.Time, tol int64) error {
	ts, err := strconv.ParseInt(value, 10, 64)
	if err != nil || len(value) > 0 && (value[0] == '+' || value[0] == '-') {
		return fmt.Errorf("%s: not a unix timestamp: %w", header, ErrMalformedSignature)
	}
	n := now.Unix()
	if ts < n-tol || ts > n+tol {
		return fmt.Errorf("%s: %w", header, ErrTimestampOutsideTolerance)
	}
	return nil
}

// timestampedHeaders returns the values of a signature header and its
// separate timestamp header, or the missing error of the first absent.
func timestampedHeaders(r Request, sigHeader, tsHeader string) (sig, ts string, err error) {
	if sig = r.Header.Get(sigHeader); sig == "" {
		return "", "", missing(sigHeader)
	}
	if ts = r.Header.Get(tsHeader); ts == "" {
		return "", "", missing(tsHeader)
	}
	return sig, ts, nil
}

func missing(header string) error {
	return fmt.Errorf("%s: %w", header, ErrMissingSignature)
}

func malformed(header, why string) error {
	return fmt.Errorf("%s: %s: %w", header, why, ErrMalformedSignature)
}

func mismatch(header string) error {
	return fmt.Errorf("%s: no configured secret matches: %w", header, ErrSignatureMismatch)
}

// noneScheme accepts everything.
type noneScheme struct{}

func (noneScheme) Verify(Request, time.Time) error { return nil }

func (noneScheme) writeSigned(io.Writer, Request) bool { return false }

func (noneScheme) sign([]byte, time.Time, string) (http.Header, string, error) {
	return http.Header{}, "", nil
}
