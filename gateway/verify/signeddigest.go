package verify

import "crypto/sha256"

// SignedDigest returns the SHA-256 of the bytes r's signature covers under
// v's scheme: the body and, per scheme, the signed timestamp (stripe,
// slack, standard, hmac-sha256 with a timestamp_header), the signed id
// (standard), or the URL's query and the sorted form parameters instead
// of the body's bytes (twilio). Two requests with one digest carry the
// same signed content: one is a copy of the other, whatever headers the
// signature leaves out (such as github's, shopify's and twilio's event
// ids) say. It returns nil for scheme none, which signs nothing, and for
// a Verifier New did not make. Call it once Verify accepted r.
func SignedDigest(v Verifier, r Request) []byte {
	s, ok := v.(scheme)
	if !ok {
		return nil
	}
	h := sha256.New()
	if !s.writeSigned(h, r) {
		return nil
	}
	return h.Sum(nil)
}

// bodySecrets is implemented by the schemes whose sender puts a secret
// inside the body (msgraph's clientState).
type bodySecrets interface {
	storedBody(body []byte) []byte
}

// StoredBody returns body as webhookd keeps and forwards it: the secrets
// v's sender puts inside it (msgraph's clientState, the subscription's
// only credential) replaced by their length, so that no admin reader or
// destination learns them; for every other scheme, body itself. Call it
// once Verify accepted body, and take the event id and signed content
// from body as received.
func StoredBody(v Verifier, body []byte) []byte {
	if s, ok := v.(bodySecrets); ok {
		return s.storedBody(body)
	}
	return body
}
