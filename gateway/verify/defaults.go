package verify

// Defaults is what a scheme's sender says about each event, used where a
// source configures nothing: where its stable event id is, where its event
// type is, and which of its headers say what the event is (forwarded to
// destinations). Specs use package eventid's forms, "json:<path>" or
// "header:<name>"; an empty spec means the sender has none and the source
// must configure it (event id) or goes without (event type).
type Defaults struct {
	// EventID is the spec of an id that survives the sender's retries.
	EventID string
	// EventType is the spec of the event's type.
	EventType string
	// ForwardedHeaders are the sender's headers a destination gets as
	// they came; never a signature or a credential of the hop.
	ForwardedHeaders []string
}

// schemeDefaults holds every scheme's Defaults; a scheme absent here has
// none (hmac-sha256, none).
var schemeDefaults = map[string]Defaults{
	SchemeStripe: {EventID: "json:id", EventType: "json:type"},
	SchemeGitHub: {
		EventID:   "header:X-GitHub-Delivery",
		EventType: "header:X-GitHub-Event",
		ForwardedHeaders: []string{
			"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID",
			"X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-Installation-Target-Type",
		},
	},
	SchemeStandard: {EventID: "header:webhook-id", EventType: "json:type"},
	SchemeShopify: {
		// The event's id, the same on every webhook Shopify sends for
		// it: Shopify's advice for spotting duplicates. Sources before
		// issue 12 used X-Shopify-Webhook-Id (README, upgrading).
		EventID:   "header:X-Shopify-Event-Id",
		EventType: "header:X-Shopify-Topic",
		ForwardedHeaders: []string{
			"X-Shopify-Topic", "X-Shopify-Shop-Domain", "X-Shopify-API-Version",
			"X-Shopify-Webhook-Id", "X-Shopify-Event-Id", "X-Shopify-Triggered-At",
		},
	},
	SchemeSlack:  {EventID: "json:event_id", EventType: "json:event.type"},
	SchemeTwilio: {EventID: "header:I-Twilio-Idempotency-Token"},
}

// SchemeDefaults returns the Defaults of scheme; the zero Defaults for
// hmac-sha256, none and unknown schemes.
func SchemeDefaults(scheme string) Defaults {
	return schemeDefaults[scheme]
}
