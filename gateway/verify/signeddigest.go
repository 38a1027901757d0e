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
