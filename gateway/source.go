package gateway

import (
	"fmt"
	"time"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/glob"
)

// Source is one configured sender, ready to receive.
type Source struct {
	// Scheme is the verify scheme's name (slack answers challenges).
	Scheme string
	// Verifier checks signatures.
	Verifier verify.Verifier
	// SignatureHeader is the source's signature header when its name
	// does not say so (hmac-sha256's verify.header): it is stored
	// masked, like every header named for a signature.
	SignatureHeader string
	// EventID extracts the sender's event id.
	EventID eventid.Extractor
	// EventType, when set, extracts the event's type (stored, matched by
	// destination filters, sent as Webhookd-Event-Type); nil when neither
	// the source nor its scheme says where it is.
	EventType *eventid.Extractor
	// OrderEntity and OrderVersion, when set, extract the ordering guard's
	// inputs.
	OrderEntity, OrderVersion *eventid.Extractor
	// Destinations is how many destinations the source has (for states).
	Destinations int
	// ForwardHeaders are the canonical names of the headers the source's
	// destinations forward by name (forward_headers): stored as they came,
	// even a credential or a signature, since they are forwarded from
	// what is stored.
	ForwardHeaders []string
	// Filters are the filters of the source's destinations that filter by
	// event type, one per such destination: an event whose type one of
	// them does not want gets no run there, and its state counts one
	// destination less.
	Filters []glob.Filter
	// Signing is how the sender signs, without a secret: what a
	// developer needs to sign a copy of an event with a development
	// secret as the sender would (the admin event stream hands it to
	// `webhookd listen --resign`). See SigningSettings.
	Signing verify.Config
	// ContentWindow, when positive, turns on the guard against copies of
	// a signed delivery under another event id: a delivery whose signed
	// content (verify.SignedDigest) an event recorded within this window
	// carried is answered as a duplicate of that event and records
	// nothing. For schemes whose event id the signature does not cover
	// (github, shopify, twilio, a header id). 0 turns it off.
	ContentWindow time.Duration
}

// SourceSpec is a source as configured.
type SourceSpec struct {
	// Verify is how the sender signs.
	Verify verify.Config
	// EventID says where the event id is (json:<path>, header:<Name> or
	// body-sha256); empty means the scheme's default.
	EventID string
	// EventType says where the event's type is (json:<path> or
	// header:<Name>); empty means the scheme's default, if any.
	EventType string
	// OrderEntity and OrderVersion say where the ordering guard's inputs
	// are, in the same forms; both or neither.
	OrderEntity, OrderVersion string
	// Destinations is how many destinations the source has.
	Destinations int
}

// SourceError says which part of a SourceSpec is wrong: Field is
// "verify", "event_id", "event_type", "order.entity" or "order.version", as the
// configuration names them.
type SourceError struct {
	Field string
	Err   error
}

func (e *SourceError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *SourceError) Unwrap() error { return e.Err }

// SigningSettings returns the settings of v that say how a sender signs
// and are no secret: the scheme and hmac-sha256's header, encoding,
// prefix, timestamp header and signed content. Secrets, keys, Meta's
// verify token and the public URL are left out: it names what it keeps,
// so a setting added to verify.Config stays out until it is added here.
func SigningSettings(v verify.Config) verify.Config {
	return verify.Config{
		Scheme: v.Scheme, Header: v.Header, Encoding: v.Encoding, Prefix: v.Prefix,
		TimestampHeader: v.TimestampHeader, SignedContent: v.SignedContent,
	}
}

// NewSource builds a Source from its spec. It returns a *SourceError
// naming the part that is wrong.
func NewSource(spec SourceSpec) (Source, error) {
	v, err := verify.New(spec.Verify)
	if err != nil {
		return Source{}, &SourceError{Field: "verify", Err: err}
	}
	idSpec := spec.EventID
	if idSpec == "" {
		idSpec = verify.SchemeDefaults(spec.Verify.Scheme).EventID
	}
	id, err := eventid.Parse(idSpec)
	if err != nil {
		return Source{}, &SourceError{Field: "event_id", Err: err}
	}
	src := Source{
		Scheme: spec.Verify.Scheme, Verifier: v, EventID: id, Destinations: spec.Destinations,
		SignatureHeader: spec.Verify.WithDefaults().Header,
		Signing:         SigningSettings(spec.Verify),
	}
	typeSpec := spec.EventType
	if typeSpec == "" {
		typeSpec = verify.SchemeDefaults(spec.Verify.Scheme).EventType
	}
	if typeSpec != "" {
		t, err := eventid.Parse(typeSpec)
		if err == nil && typeSpec == "body-sha256" {
			err = fmt.Errorf("spec %q: want json:<path> or header:<Name> (a type is never a hash)", typeSpec)
		}
		if err != nil {
			return Source{}, &SourceError{Field: "event_type", Err: err}
		}
		src.EventType = &t
	}
	if spec.OrderEntity == "" && spec.OrderVersion == "" {
		return src, nil
	}
	entity, err := eventid.Parse(spec.OrderEntity)
	if err != nil {
		return Source{}, &SourceError{Field: "order.entity", Err: err}
	}
	version, err := eventid.Parse(spec.OrderVersion)
	if err != nil {
		return Source{}, &SourceError{Field: "order.version", Err: err}
	}
	src.OrderEntity, src.OrderVersion = &entity, &version
	return src, nil
}
