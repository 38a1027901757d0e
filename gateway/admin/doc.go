// Package admin is webhookd's operator surface, mounted on the gateway's
// Echo server under /admin:
//
//	GET  /admin/events                    list events (filters, cursor paging, newest first)
//	GET  /admin/events/:source/:id        one event: payload, headers, runs, attempt log
//	POST /admin/events/:source/:id/replay replay by id (?force=true for a new generation)
//	POST /admin/replay                    bulk replay by filter (dry run by default, capped)
//	GET  /admin/                          event browser (server-rendered HTML)
//	GET  /admin/view/:source/:id          event page with Replay buttons
//	GET  /admin/view?source=&id=          the same, for the ids "." and ".." (a browser
//	                                      resolves them away as path segments)
//	     /admin/queues/                   the Asynq dashboard (asynqmon)
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
// Every answer forbids framing (X-Frame-Options: DENY); the pages'
// Content-Security-Policy admits only their own stylesheet and script.
//
// Replay is safe by default: a done run answers with its stored result
// and calls nothing; a failed or dead run is retried with the same key
// (the destination deduplicates on it); only force starts a new
// generation, <key>#N, recorded with who and why before it is enqueued.
package admin
