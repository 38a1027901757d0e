package gateway

import (
	"fmt"
	"net/http"
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
	// ContentWindow, when positive, turns on the guard against copies of
	// a signed delivery under another event id: a delivery whose signed
	// content (verify.SignedDigest) an event recorded within this window
	// carried is answered as a duplicate of that event and records
	// nothing. For schemes whose event id the signature does not cover
	// (github, shopify, twilio, a header id). 0 turns it off.
	ContentWindow time.Duration
	// Respond, when set, is the answer to every recorded delivery (new or
	// repeat) instead of webhookd's JSON: what the sender expects.
	Respond *verify.Response
	// MaxBodyBytes, when positive, caps this source's bodies instead of
	// the server's MaxBodyBytes.
	MaxBodyBytes int64
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
	// Respond is the answer the sender expects to a recorded delivery
	// (respond: {status, body, content_type}); nil means the scheme's
	// (adyen: 200 "[accepted]"; xero: 200, no body), else webhookd's
	// JSON with 202 or 200.
	Respond *verify.Response
	// MaxBodyBytes caps the source's bodies (max_body_bytes); 0 means
	// the server's.
	MaxBodyBytes int64
}

// maxRespondBody bounds a configured answer's body.
const maxRespondBody = 4096

// SourceError says which part of a SourceSpec is wrong: Field is
// "verify", "event_id", "event_type", "order.entity", "order.version",
// "respond" or "max_body_bytes", as the configuration names them.
type SourceError struct {
	Field string
	Err   error
}

func (e *SourceError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *SourceError) Unwrap() error { return e.Err }

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
		Respond:         verify.SchemeDefaults(spec.Verify.Scheme).Respond,
		MaxBodyBytes:    spec.MaxBodyBytes,
	}
	if spec.MaxBodyBytes < 0 {
		return Source{}, &SourceError{Field: "max_body_bytes", Err: fmt.Errorf("%d: must not be negative", spec.MaxBodyBytes)}
	}
	if r := spec.Respond; r != nil {
		if r.Status < 200 || r.Status > 299 || r.Status == http.StatusNoContent && r.Body != "" {
			return Source{}, &SourceError{Field: "respond.status", Err: fmt.Errorf("%d: want a 2xx status (204 without a body)", r.Status)}
		}
		if len(r.Body) > maxRespondBody {
			return Source{}, &SourceError{Field: "respond.body", Err: fmt.Errorf("at most %d bytes", maxRespondBody)}
		}
		c := *r
		if c.Body != "" && c.ContentType == "" {
			c.ContentType = "text/plain; charset=utf-8"
		}
		src.Respond = &c
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
