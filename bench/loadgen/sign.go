package loadgen

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// sign returns the headers and query a sender of s would send with body
// for event id at now: the signature (verify.Sign with the first secret),
// and the id in its header when s.EventID names one the scheme does not
// set itself.
func (s Source) sign(id string, body []byte, now time.Time) (http.Header, string, error) {
	header, rawQuery, err := verify.Sign(s.Verify, body, now, id)
	if err != nil {
		return nil, "", fmt.Errorf("error signing: %w", err)
	}
	if name, ok := strings.CutPrefix(s.EventID, "header:"); ok && header.Get(name) == "" {
		header.Set(name, id)
	}
	return header, rawQuery, nil
}
