package verify

import (
	"net/http"
	"slices"
)

// SignsHeader reports whether the header name (any case) is covered by
// the signature of every request that verifies under c, as the request's
// event headers show it ([EventHeaders]): standard's webhook-id and
// webhook-timestamp (for a Svix sender, its signed svix-id and
// svix-timestamp stand as these), the timestamp headers of slack, zoom,
// discord and sendgrid, and hmac-sha256's timestamp_header. No other header of any scheme is signed:
// a copy of a captured request may carry any value in it. An invalid c
// signs nothing.
func (c Config) SignsHeader(name string) bool {
	name = http.CanonicalHeaderKey(name)
	switch c.Scheme {
	case SchemeStandard, SchemeClerk, SchemeResend, SchemePolar:
		return name == standardIDHeader || name == standardTimestampHeader
	case SchemeSlack:
		return name == slackTimestampHeader
	case SchemeZoom:
		return name == zoomTimestampHeader
	case SchemeDiscord:
		return name == discordTimestampHeader
	case SchemeSendGrid:
		return name == sendgridTimestampHeader
	case SchemeTelnyx:
		return name == telnyxTimestampHeader
	}
	// The generic HMAC and its presets sign their timestamp header and
	// the headers their template names (build refuses a timestamp
	// header that signed_content leaves out).
	s, err := build(c)
	if err != nil {
		return false
	}
	if p, ok := s.(*presetScheme); ok {
		s = p.genericScheme
	}
	g, ok := s.(*genericScheme)
	return ok && (g.tsHeader == name || slices.Contains(g.idHeaders, name))
}
