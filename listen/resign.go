package listen

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/gateway/verify"
)

// errCannotResign is returned for a scheme whose signature --resign
// cannot make from a shared secret.
var errCannotResign = errors.New("cannot re-sign")

// resigned is an event signed again for the local app.
type resigned struct {
	// body is the body to send: the event's, or for the schemes that
	// sign inside the body (mailgun, adyen) a copy signed there.
	body []byte
	// header holds the signature headers to set over the event's.
	header http.Header
	// rawQuery is the query to send with (twilio's bodySHA256).
	rawQuery string
}

// resign signs body as the source's sender would at now, with the
// developer's secret, for the local URL forwardTo (which the schemes
// that sign the URL, twilio and square, sign). msgID fills the scheme's
// message id header where it has one. The secret never appears in an
// error.
func resign(signing admin.SigningJSON, secret string, body []byte, now time.Time, msgID, forwardTo string) (resigned, error) {
	cfg := signing.VerifyConfig()
	cfg.Secrets = []string{secret}
	switch cfg.Scheme {
	case verify.SchemeNone:
		// An unsigned source: nothing to replace.
		return resigned{body: body, header: http.Header{}}, nil
	case verify.SchemeDiscord, verify.SchemeSendGrid:
		return resigned{}, fmt.Errorf("%w: scheme %s signs with a private key, not a shared secret", errCannotResign, cfg.Scheme)
	case verify.SchemeTelnyx, verify.SchemeSNS:
		return resigned{}, fmt.Errorf("%w: scheme %s signs with a private key, not a shared secret", errCannotResign, cfg.Scheme)
	case verify.SchemeMeta:
		// Required to build the scheme; the subscribe handshake's token
		// plays no part in a signature.
		cfg.VerifyToken = "webhookd-listen"
	}
	if cfg.SignsURL() {
		cfg.PublicURL = forwardTo // the URL the local app is called at
	}
	body, err := verify.SignBody(cfg, body, now)
	if err != nil {
		return resigned{}, fmt.Errorf("%w: %w", errCannotResign, err)
	}
	header, rawQuery, err := verify.Sign(cfg, body, now, msgID)
	if err != nil {
		return resigned{}, fmt.Errorf("%w by scheme %s: %w", errCannotResign, cfg.Scheme, err)
	}
	return resigned{body: body, header: header, rawQuery: rawQuery}, nil
}
