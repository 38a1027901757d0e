package verify

// Defaults is what a scheme's sender says about each event, used where a
// source configures nothing: where its stable event id is, where its event
// type is, which of its headers say what the event is (forwarded to
// destinations), and whether copies of its signed content are refused. Specs use package eventid's forms, "json:<path>" or
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
	// ContentGuard is true when a source of the scheme answers a copy of
	// signed content already recorded as a duplicate by default
	// (duplicate_content_window defaults to the retention): the sender
	// signs no id, so a captured delivery verifies again under any fresh
	// one, and two distinct events of the sender never carry the same
	// signed content, so the guard drops nothing genuine. Where distinct
	// events can share signed content (github, shopify: bodies with
	// second-precision times) it is false and the window is off unless
	// the source sets it; where the id is signed it is not needed.
	ContentGuard bool
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
	SchemeSlack: {EventID: "json:event_id", EventType: "json:event.type"},
	// Twilio signs every form parameter, and each request names the
	// message or call it is about (its SID) and what happened to it
	// (status, sequence number): two distinct events never share signed
	// content. Its idempotency token is not signed.
	SchemeTwilio: {EventID: "header:I-Twilio-Idempotency-Token", ContentGuard: true},
	// Meta sends no delivery id, and one POST batches entry[].changes[]:
	// the POST is one event, its id the body's SHA-256 (a retry resends
	// the same bytes), its type the product ("whatsapp_business_account",
	// "page", "instagram").
	SchemeMeta: {EventID: "body-sha256", EventType: "json:object"},
	// Zoom sends no delivery id; a retry resends the same body (its
	// event_ts, in ms, included) under a new signed timestamp.
	SchemeZoom: {EventID: "body-sha256", EventType: "json:event"},
	// Discord's webhook events carry no id of their own; interactions do
	// (json:id), but need an interaction response webhookd cannot give.
	SchemeDiscord: {EventID: "body-sha256", EventType: "json:event.type"},
	// One POST batches events, each with its sg_event_id: the POST is one
	// event, its id the body's SHA-256 (a retry resends the batch).
	SchemeSendGrid: {EventID: "body-sha256"},
	// A notification's own id is optional and one POST batches value[]:
	// the POST is one event, its id the body's SHA-256 (a retry resends
	// the batch), its type the first notification's changeType.
	SchemeMSGraph: {EventID: "body-sha256", EventType: "json:value.0.changeType"},
	// Mailgun's event-data.id names the event; a retry resends it. Mailgun
	// signs only timestamp + token, never event-data: the guard answers
	// any body carrying a signature object already recorded (a forged
	// event-data under a captured signature) as a duplicate, which is
	// Mailgun's advice to refuse reused tokens. Each delivery gets a
	// fresh token, so distinct events never share it.
	SchemeMailgun: {EventID: "json:event-data.id", EventType: "json:event-data.event", ContentGuard: true},
	// One POST batches NotificationRequestItems: the POST is one event,
	// its id the body's SHA-256 (a retry resends the batch; Adyen's own
	// key, pspReference + eventCode, is two fields), its type the first
	// item's eventCode. Adyen signs eight fields of each item and no
	// timestamp: the same items with other whitespace or other unsigned
	// fields hash to a new id, so the guard answers them as duplicates.
	// Distinct events differ in a signed field (pspReference, eventCode,
	// success).
	SchemeAdyen: {
		EventID:      "body-sha256",
		EventType:    "json:notificationItems.0.NotificationRequestItem.eventCode",
		ContentGuard: true,
	},
	// Square's event_id is kept across retries (Square: "use event_id to
	// detect duplicates").
	SchemeSquare: {EventID: "json:event_id", EventType: "json:type"},
	SchemePaddle: {EventID: "json:event_id", EventType: "json:event_type"},
	// Razorpay signs the body only, not X-Razorpay-Event-Id, and no
	// timestamp: the guard answers the body under a fresh id as a
	// duplicate. Each body names its event and entity and carries
	// created_at.
	SchemeRazorpay: {
		EventID:          "header:X-Razorpay-Event-Id",
		EventType:        "json:event",
		ForwardedHeaders: []string{"X-Razorpay-Event-Id"},
		ContentGuard:     true,
	},
	// Linear-Delivery is a UUID per delivery; that a retry keeps it is
	// unconfirmed (each retry re-signs a new webhookTimestamp, so the
	// body's hash would not do). Linear-Delivery is not signed: within
	// the minute webhookTimestamp allows, the guard answers the body
	// under a fresh id as a duplicate; webhookTimestamp (ms) keeps
	// distinct events' bodies apart.
	SchemeLinear: {
		EventID:          "header:Linear-Delivery",
		EventType:        "json:type",
		ForwardedHeaders: []string{"Linear-Delivery", "Linear-Event"},
		ContentGuard:     true,
	},
	// Each Update's update_id; its type is which field it holds (message,
	// callback_query, …), not a value: none by default.
	SchemeTelegram: {EventID: "json:update_id"},
	// Idempotency-Key (GitLab 17.4 and later) is kept across retries, and
	// across manual resends from the webhook's log; X-Gitlab-Event-UUID
	// is per event but documented without that promise. Idempotency-Key
	// is not forwarded: webhookd sets its own for destinations.
	SchemeGitLab: {
		EventID:   "header:Idempotency-Key",
		EventType: "header:X-Gitlab-Event",
		ForwardedHeaders: []string{
			"X-Gitlab-Event", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID", "X-Gitlab-Instance",
		},
	},
}

// SchemeDefaults returns the Defaults of scheme; the zero Defaults for
// hmac-sha256, none and unknown schemes.
func SchemeDefaults(scheme string) Defaults {
	return schemeDefaults[scheme]
}
