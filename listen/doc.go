// Package listen is `webhookd listen`, the local development loop: it
// follows the events a running gateway records (GET
// /admin/events/stream, a read-only admin token is enough) and forwards
// each, in the gateway's order, to a URL on the developer's machine, with
// its raw body, its original headers and the Webhookd-* headers (key
// <source>:listen:<id>). No tunnel and no inbound port: the laptop only
// makes outbound requests.
//
// Nothing is missed and nothing answered is forwarded again. The
// gateway's feed never hands out a position before one it gave already
// (dedupe/feed.go), and the cursor of the last event handled is kept in a
// state file (state.go), written after each event's answer, so a laptop
// that slept, a network that dropped or a restart resumes after it. The
// local URL is retried while it is down (connection refused, 5xx, 408,
// 429, a redirect); an answer of another 4xx is the app's own verdict and
// the stream moves on. A stop by signal finishes the call in flight and
// writes its cursor first. Only a process killed outright between the
// app's answer and the state file's rename forwards that one event again
// on restart, with the same Idempotency-Key and a higher
// Webhookd-Attempt, so an app that deduplicates on the key (as it must
// for any webhook) sees it once.
//
// With a development secret (Config.Resign) the sender's signature,
// which the gateway stores masked and so never forwards, is replaced by
// one made at forwarding time by the source's scheme, so the local app
// verifies with its development secret as it would in production.
//
// Secure by default: the admin token is sent only to the gateway and
// never printed, and the URL forwarded to must be on this machine
// (loopback) unless AllowRemote says otherwise.
package listen
