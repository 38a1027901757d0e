package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"time"
)

const (
	shopifyHeader   = "X-Shopify-Hmac-Sha256"
	shopifyIDHeader = "X-Shopify-Webhook-Id"
	// shopifyEventHeader is the event's id (the default event id).
	shopifyEventHeader = "X-Shopify-Event-Id"
)

// shopifyScheme verifies X-Shopify-Hmac-Sha256: base64 HMAC-SHA256 of the
// body.
type shopifyScheme struct {
	macs []*mac
}

// parseShopifyHeader decodes an X-Shopify-Hmac-Sha256 value into dst.
func parseShopifyHeader(dst *[sha256.Size]byte, v string) error {
	if !decodeBase64(dst[:], v) {
		return malformed(shopifyHeader, "want base64 of 32 bytes")
	}
	return nil
}

func (s *shopifyScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(shopifyHeader)
	if v == "" {
		return missing(shopifyHeader)
	}
	var got [sha256.Size]byte
	if err := parseShopifyHeader(&got, v); err != nil {
		return err
	}
	return bodyMAC(s.macs, r.Body, got[:], shopifyHeader)
}

// writeSigned writes the body, all Shopify signs.
func (s *shopifyScheme) writeSigned(w io.Writer, r Request) bool {
	_, _ = w.Write(r.Body)
	return true
}

func (s *shopifyScheme) sign(body []byte, _ time.Time, msgID string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	st.h.Write(body)
	h := http.Header{}
	h.Set(shopifyHeader, base64.StdEncoding.EncodeToString(st.finish()))
	if msgID != "" {
		h.Set(shopifyIDHeader, msgID)
		h.Set(shopifyEventHeader, msgID)
	}
	return h, "", nil
}
