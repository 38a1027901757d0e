package sender

import (
	"fmt"
	"net/url"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// senderBody is the test event of the senders of issue 32 whose default
// event id is not where DefaultBody's generic event has one (or that post
// a form): their own shape, the id in its place; nil for the others.
func senderBody(scheme, id string, now time.Time) []byte {
	switch scheme {
	case verify.SchemeHubSpot:
		return fmt.Appendf(nil, `[{"eventId":%q,"subscriptionId":1,"portalId":62515,"occurredAt":%d,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM"}]`, id, now.UnixMilli())
	case verify.SchemeCoinbase:
		return fmt.Appendf(nil, `{"attempt_number":1,"event":{"id":%q,"type":"charge:confirmed","data":{"code":"DEMO"}},"id":"delivery_demo"}`, id)
	case verify.SchemeTelnyx:
		return fmt.Appendf(nil, `{"data":{"event_type":"message.received","id":%q,"occurred_at":"2024-01-01T00:00:00Z","payload":{"text":"demo"},"record_type":"event"}}`, id)
	case verify.SchemeMailchimp:
		return []byte(url.Values{"mandrill_events": {fmt.Sprintf(`[{"event":"send","_id":%q,"ts":%d}]`, id, now.Unix())}}.Encode())
	case verify.SchemeTrello:
		return fmt.Appendf(nil, `{"action":{"id":%q,"type":"updateCard","data":{"card":{"id":"c1"}}},"model":{"id":"m1"}}`, id)
	case verify.SchemeBigCommerce:
		return fmt.Appendf(nil, `{"created_at":%d,"store_id":"1","producer":"stores/demo","scope":"store/order/created","hash":%q,"data":{"type":"order","id":1}}`, now.Unix(), id)
	case verify.SchemePagerDuty:
		return fmt.Appendf(nil, `{"event":{"id":%q,"event_type":"incident.triggered","resource_type":"incident","occurred_at":"2024-01-01T00:00:00Z","data":{"id":"P1"}}}`, id)
	case verify.SchemeSegment:
		return fmt.Appendf(nil, `{"messageId":%q,"type":"track","event":"Demo","userId":"u1"}`, id)
	}
	return nil
}
