package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/field"
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
	// PlanFunc says which of the source's destinations want an event of
	// a type (jobs.Routes.Plan, the one routing answer); nil: all of them.
	PlanFunc func(eventType string) []string
	// ForwardHeaders are the canonical names of the headers the source's
	// destinations forward by name (forward_headers): stored as they came,
	// even a credential or a signature, since they are forwarded from
	// what is stored.
	ForwardHeaders []string
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
	// Respond, when set, is the answer to every recorded delivery (new or
	// repeat) instead of webhookd's JSON: what the sender expects.
	Respond *verify.Response
	// MaxBodyBytes, when positive, caps this source's bodies instead of
	// the server's MaxBodyBytes.
	MaxBodyBytes int64
}

// SourceSpec is how a source receives, as configured (the YAML keys of a
// `sources:` entry that concern receiving). NewSource checks and builds
// it.
type SourceSpec struct {
	// Verify is how the sender signs.
	Verify verify.Config `yaml:"verify"`
	// EventID says where the event id is (json:<path>, header:<Name> or
	// body-sha256); empty means the scheme's default.
	EventID string `yaml:"event_id"`
	// EventType says where the event's type is (json:<path> or
	// header:<Name>); empty means the scheme's default, if any.
	EventType string `yaml:"event_type"`
	// Order, when set, says where the ordering guard's inputs are.
	Order *OrderSpec `yaml:"order"`
	// DuplicateContentWindow: a delivery whose signed content an event
	// recorded within it carried, under another id, is a duplicate of
	// that event. 0 turns it off; nil means the scheme's default
	// (defaultContentWindow).
	DuplicateContentWindow *time.Duration `yaml:"duplicate_content_window"`
	// Respond is the answer the sender expects to a recorded delivery
	// (respond: {status, body, content_type}); nil means the scheme's
	// (adyen: 200 "[accepted]"; xero: 200, no body), else webhookd's
	// JSON with 202 or 200. The status must be 2xx (204 without a body),
	// the body at most 4 KiB; content_type defaults to text/plain.
	Respond *verify.Response `yaml:"respond"`
	// MaxBodyBytes caps the source's bodies (max_body_bytes), in bytes;
	// 0 means the process's max_body_bytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
}

// maxRespondBody bounds a configured answer's body.
const maxRespondBody = 4096

// OrderSpec says where an event's entity and version are, in the forms of
// package eventid; both are required.
type OrderSpec struct {
	// Entity names what the event is about (json:data.object.id).
	Entity string `yaml:"entity"`
	// Version orders an entity's events (json:created).
	Version string `yaml:"version"`
	// AllowUnsignedHeader accepts an entity or version read from a header
	// the scheme does not sign, which a replayed copy may set at will.
	AllowUnsignedHeader bool `yaml:"allow_unsigned_header"`
	// Mode is OrderStale (the default: an older version is skipped) or
	// OrderFIFO (each destination also gets an entity's events one call
	// at a time, in order).
	Mode string `yaml:"mode"`
	// OnFailure is, in fifo mode, what a failed or dead run does to its
	// entity's later events: OrderContinue (the default) lets them go
	// on, OrderHold keeps them waiting until it is replayed.
	OnFailure string `yaml:"on_failure"`
	// ReorderWindow is, in fifo mode with a version, how long an event
	// waits after it was recorded for an earlier version of its entity
	// that may still arrive (senders do not keep order). Defaults to 0:
	// an event goes as soon as the events before it are settled. At most
	// MaxReorderWindow.
	ReorderWindow time.Duration `yaml:"reorder_window"`
}

// MaxReorderWindow bounds OrderSpec.ReorderWindow: every event of the
// source's ordered destinations waits that long.
const MaxReorderWindow = time.Hour

// The order modes and failure policies of OrderSpec.
const (
	OrderStale    = "stale"
	OrderFIFO     = "fifo"
	OrderContinue = "continue"
	OrderHold     = "hold"
)

// SourceOptions is what NewSource needs to know of the rest of the
// configuration.
type SourceOptions struct {
	// Retention bounds DuplicateContentWindow (the events it points at
	// are kept that long) and is the default window where the scheme has
	// one.
	Retention time.Duration
	// PlanFunc is Source.PlanFunc.
	PlanFunc func(eventType string) []string
	// ForwardHeaders are the headers the source's destinations forward
	// by name (forward_headers), in any case.
	ForwardHeaders []string
}

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

// NewSource checks spec and builds its Source. Every problem is reported,
// joined, as a *field.Error whose path is the spec's key ("event_id",
// "verify.secrets[0]", "order.version").
func NewSource(spec SourceSpec, opts SourceOptions) (Source, error) {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	v, err := verify.New(spec.Verify)
	if err != nil {
		// verify's errors name their key (verify.secrets[0]: …).
		add(field.Prefix("", err))
	}
	src := Source{
		Scheme: spec.Verify.Scheme, Verifier: v, PlanFunc: opts.PlanFunc,
		SignatureHeader: spec.Verify.WithDefaults().Header,
		Signing:         SigningSettings(spec.Verify),
		Respond:         verify.SchemeDefaults(spec.Verify.Scheme).Respond,
		MaxBodyBytes:    spec.MaxBodyBytes,
	}
	if spec.MaxBodyBytes < 0 {
		add(field.Errorf("max_body_bytes", "must not be negative"))
	}
	if r := spec.Respond; r != nil {
		switch {
		case r.Status < 200 || r.Status > 299 || r.Status == http.StatusNoContent && r.Body != "":
			add(field.Errorf("respond.status", "%d: want a 2xx status (204 without a body)", r.Status))
		case len(r.Body) > maxRespondBody:
			add(field.Errorf("respond.body", "at most %d bytes", maxRespondBody))
		}
		c := *r
		if c.Body != "" && c.ContentType == "" {
			c.ContentType = "text/plain; charset=utf-8"
		}
		src.Respond = &c
	}
	for _, name := range opts.ForwardHeaders {
		if name = http.CanonicalHeaderKey(name); !slices.Contains(src.ForwardHeaders, name) {
			src.ForwardHeaders = append(src.ForwardHeaders, name)
		}
	}
	defaults := verify.SchemeDefaults(spec.Verify.Scheme)
	idSpec := cmp.Or(spec.EventID, defaults.EventID)
	switch {
	case idSpec == "" && slices.Contains(verify.Schemes, spec.Verify.Scheme):
		add(field.Errorf("event_id", "required: scheme %s names no event id; write json:<path>, header:<Name> or body-sha256", spec.Verify.Scheme))
	case idSpec == "":
		// An unknown scheme is the problem to report, not its id.
	default:
		if src.EventID, err = eventid.Parse(idSpec); err != nil {
			add(&field.Error{Path: "event_id", Err: err})
		}
	}
	typeSpec := spec.EventType
	if typeSpec == "" {
		typeSpec = defaults.EventType
	}
	if typeSpec != "" {
		t, err := eventid.Parse(typeSpec)
		if err == nil && typeSpec == "body-sha256" {
			err = fmt.Errorf("spec %q: want json:<path> or header:<Name> (a type is never a hash)", typeSpec)
		}
		if err != nil {
			add(&field.Error{Path: "event_type", Err: err})
		}
		src.EventType = &t
	}
	if o := spec.Order; o != nil {
		src.OrderEntity = orderField(spec, "entity", o.Entity, add)
		if o.Version != "" || o.Mode != OrderFIFO {
			// fifo without a version follows the order recorded.
			src.OrderVersion = orderField(spec, "version", o.Version, add)
		}
		switch o.Mode {
		case "", OrderStale, OrderFIFO:
		default:
			add(field.Errorf("order.mode", "%q is not a mode: stale or fifo", o.Mode))
		}
		switch {
		case o.OnFailure != "" && o.OnFailure != OrderContinue && o.OnFailure != OrderHold:
			add(field.Errorf("order.on_failure", "%q is not a policy: continue or hold", o.OnFailure))
		case o.OnFailure != "" && o.Mode != OrderFIFO:
			add(field.Errorf("order.on_failure", "applies only with mode: fifo"))
		}
		switch {
		case o.ReorderWindow < 0 || o.ReorderWindow > MaxReorderWindow:
			add(field.Errorf("order.reorder_window", "%s is out of range: 0 to %s", o.ReorderWindow, MaxReorderWindow))
		case o.ReorderWindow > 0 && (o.Mode != OrderFIFO || o.Version == ""):
			add(field.Errorf("order.reorder_window", "applies only with mode: fifo and a version (without one, the order recorded is the order)"))
		}
	}
	src.ContentWindow = contentWindow(spec, opts.Retention, add)
	return src, errors.Join(errs...)
}

// orderField parses one of order's fields, refusing a header the scheme
// does not sign unless the operator accepts that.
func orderField(spec SourceSpec, key, value string, add func(error)) *eventid.Extractor {
	path := "order." + key
	ex, err := eventid.Parse(value)
	if err != nil {
		add(&field.Error{Path: path, Err: err})
		return nil
	}
	if h, ok := ex.Header(); ok && !spec.Order.AllowUnsignedHeader && !spec.Verify.SignsHeader(h) {
		add(field.Errorf(path, "header %s is not covered by scheme %s's signature: a replayed copy could carry any %s "+
			"and hold back every later update of the entity (order.allow_unsigned_header: true accepts that)",
			h, spec.Verify.Scheme, key))
	}
	return &ex
}

// contentWindow is the source's duplicate_content_window: as configured
// (at most retention, never for an unsigned source), else the scheme's
// default (defaultContentWindow).
func contentWindow(spec SourceSpec, retention time.Duration, add func(error)) time.Duration {
	w := spec.DuplicateContentWindow
	if w == nil {
		return defaultContentWindow(spec.Verify.Scheme, retention)
	}
	switch {
	case *w < 0:
		add(field.Errorf("duplicate_content_window", "must not be negative"))
	case *w > 0 && spec.Verify.Scheme == verify.SchemeNone:
		add(field.Errorf("duplicate_content_window", "scheme none signs nothing to compare"))
	case *w > retention:
		add(field.Errorf("duplicate_content_window", "must be at most retention (the events it points at are kept that long)"))
	}
	return max(*w, 0)
}

// defaultContentWindow is a scheme's duplicate_content_window when the
// source sets none: retention where the scheme's sender signs no id and
// never sends two events with the same signed content
// (verify.Defaults.ContentGuard, which says why per scheme), else 0
// (off).
func defaultContentWindow(scheme string, retention time.Duration) time.Duration {
	if verify.SchemeDefaults(scheme).ContentGuard {
		return retention
	}
	return 0
}
