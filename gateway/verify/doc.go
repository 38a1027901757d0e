// Package verify checks the signatures that webhook senders put on their
// requests, and produces them (for `webhookd send` and for tests).
//
// A source's [Config] names a scheme and one or more secrets. Several secrets
// exist so a secret can be rotated without downtime: a request verifies when
// any secret matches. All comparisons use [hmac.Equal] (constant time), and
// every check runs over the exact raw bytes received. [New] precomputes
// per-secret state once, so [Verifier.Verify] does little work per request.
//
// Verification fails with an error that wraps exactly one of four sentinels
// ([ErrMissingSignature], [ErrMalformedSignature], [ErrSignatureMismatch],
// [ErrTimestampOutsideTolerance]) and names the header involved. Errors
// never contain a secret or an expected signature.
//
// # Schemes
//
// stripe: header Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]. The
// signed content is "<t>.<body>" under HMAC-SHA256 keyed with the secret as
// given (whsec_… is used verbatim, as Stripe does). Any v1 may match; other
// schemes in the header (v0, …) are ignored. t must be within the tolerance.
//
// github: header X-Hub-Signature-256: sha256=<hex>, HMAC-SHA256 of the body.
// GitHub sends no timestamp, and its event id (X-GitHub-Delivery) is not
// signed: a copy of a captured request verifies under any id.
// [SignedDigest] names what a signature covers, so such copies can be
// told apart from new events.
//
// standard: Standard Webhooks (https://www.standardwebhooks.com), also sent
// by Svix. Headers webhook-id, webhook-timestamp and webhook-signature, or
// their svix-id, svix-timestamp and svix-signature equivalents. The signature
// header is a space-separated list of "<version>,<base64>"; v1 entries are
// HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed with the base64-decoded
// secret after the "whsec_" prefix. Other versions (such as v1a) are
// ignored. The timestamp must be within the tolerance.
//
// shopify: header X-Shopify-Hmac-Sha256, base64 HMAC-SHA256 of the body with
// the app's client secret. No timestamp.
//
// slack: headers X-Slack-Signature: v0=<hex> and X-Slack-Request-Timestamp.
// The signed content is "v0:<timestamp>:<body>"; the timestamp must be within
// the tolerance. Its url_verification request is a handshake ([Handshake]):
// answered with its challenge once the signature has verified.
//
// twilio: header X-Twilio-Signature, base64 HMAC-SHA1 keyed with the auth
// token over the URL Twilio requested followed, for form bodies, by every
// form parameter as name+value, sorted by name (then value). For JSON bodies
// Twilio adds a bodySHA256 query parameter (hex SHA-256 of the body) and signs
// the URL alone; both the signature and the body hash must match. The URL is
// Config.PublicURL (as Twilio sees it, since proxies change scheme, host and
// port) with the request's own query string when it has one. Like Twilio's
// own libraries, the URL is tried with and without the default port. No
// timestamp.
//
// The senders added for issue 15 each live in their own file, their
// details in docs/providers.md: meta (GitHub's format, plus its subscribe
// GET), zoom (Slack's v0 format under x-zm-* headers, plus
// endpoint.url_validation), discord (Ed25519, plus PING), telegram and
// gitlab (a token header, token.go), sendgrid (ECDSA P-256), msgraph
// (clientState in the body, plus validationToken), mailgun (HMAC inside
// the body), adyen (HMAC inside each notification item), paddle, and the
// presets of the generic HMAC (presets.go): razorpay, linear (plus its
// body's webhookTimestamp) and square (public_url + body). Handshakes are
// one concept ([Handshake], handshake.go), answered before and without
// recording.
//
// hmac-sha256: a generic HMAC-SHA256 in a configurable header (default
// X-Webhook-Signature), hex or base64, with an optional prefix (default
// "sha256="). With TimestampHeader set, that header holds a unix timestamp
// that must be within the tolerance, and SignedContent (default
// "{timestamp}.{body}", otherwise "{body}") says which bytes are signed; it
// must contain {timestamp} when TimestampHeader is set, since a timestamp
// that is checked but not signed stops no replay.
//
// none: no check at all. Only allowed when Config.AllowUnsigned is true;
// callers should log that loudly at start.
package verify
