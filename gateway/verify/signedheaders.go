package verify

import "net/http"

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
	case SchemeStandard:
		return name == standardIDHeader || name == standardTimestampHeader
	case SchemeSlack:
		return name == slackTimestampHeader
	case SchemeZoom:
		return name == zoomTimestampHeader
	case SchemeDiscord:
		return name == discordTimestampHeader
	case SchemeSendGrid:
		return name == sendgridTimestampHeader
	case SchemeHMACSHA256:
		// build refuses a timestamp_header that signed_content leaves out.
		return c.TimestampHeader != "" && name == http.CanonicalHeaderKey(c.TimestampHeader) && c.Validate() == nil
	}
	return false
}
