// Package admin is webhookd's operator surface, mounted on the gateway's
// Echo server under /admin:
//
//	GET  /admin/events                    list events (search and filters, count, newer and older
//	                                      pages); the list page for a browser (Accept: text/html)
//	GET  /admin/events/stream             follow recorded events from a cursor (long poll; stream.go),
//	                                      what webhookd listen reads; a read-only token is enough
//	GET  /admin/events/:source/:id        one event: payload, headers, runs, attempt log; the
//	                                      event page for a browser (one URL per event)
//	POST /admin/events/:source/:id/replay replay by id (force=true for a new generation, which
//	                                      names destination=<name> or * and a reason)
//	POST /admin/replay                    bulk replay by filter (dry run by default, capped)
//	GET  /admin/                          the list page
//	GET  /admin/view/:source/:id          the event page's old address: redirects (301)
//	GET  /admin/view?source=&id=          the event page, for the ids "." and ".." (a browser
//	                                      resolves them away as path segments)
//	POST /admin/view/:source/:id/replay   the event page's Replay and Force replay forms
//	     /admin/view/bulk-replay          bulk replay from the page: preview, then confirm
//	                                      with a reason
//	GET  /admin/destinations              destinations' states (and pause, resume)
//	POST /admin/destinations/:source/:name/test
//	                                      send a test event (jobs.TestSender), recorded nowhere
//	GET  /admin/view/destinations/:source/:name
//	                                      a destination's page: state, calls over the last hour
//	                                      and day (charts), last errors, affected events, pause,
//	                                      resume, Send test event (POST …/test)
//	     /admin/queues/                   the Asynq dashboard (asynqmon), its page rewritten to
//	                                      load nothing from another host (dashboard.go)
//	     /admin/login                     sets the session cookie for browsers (12h)
//	POST /admin/logout                    clears it
//	GET  /admin/assets/                   the pages' stylesheet and script (no token needed)
//
// Every route but login and assets is behind one check, in one of three
// modes (Config, Admin.Mode):
//
//   - token: a request carries "Authorization: Bearer <token>" or the
//     session cookie the login page sets. Several full tokens may be
//     configured (rotation) and read-only ones, which may GET everything
//     but are refused (403) every other method: replays, pauses, resumes,
//     dashboard actions. A presented token is compared with every
//     configured one in constant time. The cookie carries its role and
//     expiry under an HMAC keyed by the token that signed in, so its
//     holder cannot extend it or raise its role, and it ends when that
//     token leaves the config.
//   - off (no token configured): every route, login included, answers
//     403 saying how to turn admin on. 403, not 404, so that a client
//     tells "admin is off" from "no such event".
//   - unsafe tokenless loopback (an explicit opt-in): only loopback peers
//     are answered, and only when the request's Host (and Origin, when
//     sent) names this server: a loopback address, localhost, or the
//     listen address's name (Config.Hosts). A web page that DNS rebinding
//     pointed at 127.0.0.1 names its own host and is refused. A reverse
//     proxy on the same host makes every request a loopback peer, so
//     this mode is as safe as that proxy's Host header.
//
// State-changing requests from another origin are refused
// (net/http's CrossOriginProtection), so a web page cannot make an
// operator's browser replay events.
//
// Every answer forbids framing (X-Frame-Options: DENY); every answer's
// Content-Security-Policy, the dashboard's included, admits only this
// server's stylesheets, scripts, fonts and fetches, and no inline script
// (the dashboard's run-time styles carry a per-answer nonce). Pages
// showing something in flight follow it by reading themselves again
// (admin.js), no reload.
//
// Replay is safe by default: a done run answers with its stored result
// and calls nothing; a failed or dead run is retried with the same key
// (the destination deduplicates on it); only force starts a new
// generation, <key>#N, recorded with who and why before it is enqueued,
// and it must name its destinations and a reason. Those rules are
// jobs.Replayer's (package jobs, beside the key); admin checks the
// request's text and filter at the edge, maps the errors to statuses
// (400 jobs.ErrBadReplay, 404 unknown event, 422 unknown source or
// destination, 503 jobs.ErrEnqueueFailed) and renders the answer. The
// API's POSTs read only JSON bodies: any other is 415, never an empty
// request.
package admin
