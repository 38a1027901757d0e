// Package gateway is webhookd's HTTP side: the Echo server that receives
// webhooks (POST /webhooks/:source), verifies them, records each event once
// through dedupe, and hands new events to the queue off the request path;
// plus /healthz, /readyz and /metrics.
//
// A 2xx is sent only after the event's row has committed. Errors are JSON
// {"error": "…"}, mapped to status codes in one HTTPErrorHandler, and never
// carry a secret or an expected signature.
package gateway
