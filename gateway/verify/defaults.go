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
	// Respond, when set, is the answer the sender expects to a delivery
	// instead of webhookd's own (Adyen's "[accepted]"); a source's
	// respond overrides it.
	Respond *Response
}

// Response is an answer a sender expects to its deliveries.
type Response struct {
	// Status is the HTTP status (2xx).
	Status int `yaml:"status"`
	// ContentType is the answer's Content-Type; empty with no body.
	ContentType string `yaml:"content_type"`
	// Body is the answer's body.
	Body string `yaml:"body"`
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
	// success). Adyen's docs: answer "[accepted]" (else it retries).
	SchemeAdyen: {
		EventID:      "body-sha256",
		EventType:    "json:notificationItems.0.NotificationRequestItem.eventCode",
		ContentGuard: true,
		Respond:      &Response{Status: 200, ContentType: "text/plain; charset=utf-8", Body: "[accepted]"},
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

// senderDefaults are the Defaults of the senders of issue 32; the
// reasons, and what stays an assumption, are in docs/providers.md.
var senderDefaults = map[string]Defaults{
	// One POST batches events; a retry resends it with attemptNumber
	// changed, so the body's hash would not do: the first event's id.
	SchemeHubSpot: {EventID: "json:0.eventId", EventType: "json:0.subscriptionType"},
	// Connect sends no delivery id.
	SchemeDocuSign: {EventID: "body-sha256", EventType: "json:event"},
	SchemeTypeform: {EventID: "json:event_id", EventType: "json:event_type"},
	SchemeAlchemy:  {EventID: "json:id", EventType: "json:type"},
	// The body's own id changes with attempt_number: the event's.
	SchemeCoinbase: {EventID: "json:event.id", EventType: "json:event.type"},
	// One POST batches events; Xero expects 200 (not 202).
	SchemeXero: {EventID: "body-sha256", EventType: "json:events.0.eventType",
		Respond: &Response{Status: 200}},
	SchemeZendesk:   {EventID: "json:id", EventType: "json:type"},
	SchemeAirwallex: {EventID: "json:id", EventType: "json:name"},
	SchemeOrb:       {EventID: "json:id", EventType: "json:type"},
	SchemeTikTok:    {EventID: "body-sha256", EventType: "json:event"},
	SchemeTelnyx:    {EventID: "json:data.id", EventType: "json:data.event_type"},
	SchemeIntercom:  {EventID: "json:id", EventType: "json:topic"},
	// A form whose mandrill_events batches events.
	SchemeMailchimp: {EventID: "body-sha256"},
	SchemeX:         {EventID: "body-sha256"},
	SchemeSNS:       {EventID: "json:MessageId", ForwardedHeaders: []string{"X-Amz-Sns-Message-Id", "X-Amz-Sns-Topic-Arn"}},
	// Twitch resends a message under its id.
	SchemeTwitch: {EventID: "header:Twitch-Eventsub-Message-Id", EventType: "header:Twitch-Eventsub-Subscription-Type",
		ForwardedHeaders: []string{"Twitch-Eventsub-Message-Id", "Twitch-Eventsub-Message-Type", "Twitch-Eventsub-Subscription-Type", "Twitch-Eventsub-Subscription-Version"}},
	SchemeAsana:   {EventID: "body-sha256", EventType: "json:events.0.action"},
	SchemeDropbox: {EventID: "body-sha256"},
	SchemeTrello:  {EventID: "json:action.id", EventType: "json:action.type"},
	SchemeBitbucket: {EventID: "header:X-Request-UUID", EventType: "header:X-Event-Key",
		ForwardedHeaders: []string{"X-Event-Key", "X-Hook-UUID", "X-Request-UUID", "X-Attempt-Number"}},
	// Atlassian keeps X-Atlassian-Webhook-Identifier across retries.
	SchemeJira: {EventID: "header:X-Atlassian-Webhook-Identifier", EventType: "json:webhookEvent",
		ForwardedHeaders: []string{"X-Atlassian-Webhook-Identifier", "X-Atlassian-Webhook-Retry"}},
	SchemeWooCommerce: {EventID: "header:X-WC-Webhook-Delivery-ID", EventType: "header:X-WC-Webhook-Topic",
		ForwardedHeaders: []string{"X-WC-Webhook-Topic", "X-WC-Webhook-Resource", "X-WC-Webhook-Event", "X-WC-Webhook-ID", "X-WC-Webhook-Delivery-ID", "X-WC-Webhook-Source"}},
	SchemeBigCommerce: {EventID: "json:hash", EventType: "json:scope"},
	SchemeCalendly:    {EventID: "body-sha256", EventType: "json:event"},
	SchemePagerDuty:   {EventID: "json:event.id", EventType: "json:event.event_type"},
	SchemeSentry: {EventID: "header:Request-ID", EventType: "header:Sentry-Hook-Resource",
		ForwardedHeaders: []string{"Sentry-Hook-Resource", "Sentry-Hook-Timestamp", "Request-ID"}},
	SchemeVercel:       {EventID: "json:id", EventType: "json:type"},
	SchemeNetlify:      {EventID: "body-sha256", EventType: "json:state"},
	SchemeSegment:      {EventID: "json:messageId", EventType: "json:type"},
	SchemePostmark:     {EventID: "body-sha256", EventType: "json:RecordType"},
	SchemePipedrive:    {EventID: "body-sha256", EventType: "json:event"},
	SchemeClerk:        {EventID: "header:webhook-id", EventType: "json:type"},
	SchemeResend:       {EventID: "header:webhook-id", EventType: "json:type"},
	SchemePolar:        {EventID: "header:webhook-id", EventType: "json:type"},
	SchemeLemonSqueezy: {EventID: "body-sha256", EventType: "json:meta.event_name"},
	SchemeCheckout:     {EventID: "json:id", EventType: "json:type"},
	SchemeGoCardless:   {EventID: "body-sha256", EventType: "json:events.0.action"},
	SchemeRecurly:      {EventID: "json:id", EventType: "json:event_type"},
	SchemeWebflow:      {EventID: "body-sha256", EventType: "json:triggerType"},
	SchemeContentful: {EventID: "body-sha256", EventType: "header:X-Contentful-Topic",
		ForwardedHeaders: []string{"X-Contentful-Topic", "X-Contentful-Webhook-Name"}},
	// Sanity keeps idempotency-key across retries.
	SchemeSanity: {EventID: "header:Idempotency-Key", EventType: "header:Sanity-Operation",
		ForwardedHeaders: []string{"Sanity-Operation", "Sanity-Document-Id", "Sanity-Project-Id", "Sanity-Dataset"}},
	SchemeCal: {EventID: "body-sha256", EventType: "json:triggerEvent"},
}

// SchemeDefaults returns the Defaults of scheme; the zero Defaults for
// hmac-sha256, none and unknown schemes.
func SchemeDefaults(scheme string) Defaults {
	if d, ok := senderDefaults[scheme]; ok {
		return d
	}
	return schemeDefaults[scheme]
}
