package admin

import (
	"context"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// Guessing admin tokens is throttled per client address: each request
// that presents a token or a session cookie that does not match takes one
// of Config.WrongTokenBurst tries (defaultWrongTokenBurst), which come back one every failureEvery; an
// address with none left is answered 429 without its token being looked
// at, whatever it presents, until one comes back. A request that presents
// nothing (a browser on its way to the login page) takes no try. Every
// such refusal is logged as one line per failureLogEvery with the counts,
// not one line each, so guessing cannot flood the log.
const (
	defaultWrongTokenBurst = 10
	failureEvery           = 3 * time.Second
	failureLogEvery        = time.Minute
	// maxThrottled bounds the addresses remembered; past it, those whose
	// tries are all back are forgotten first.
	maxThrottled = 1 << 16
)

// throttle counts wrong admin tokens by client address.
type throttle struct {
	burst int
	now   func() time.Time
	log   *slog.Logger

	mu      sync.Mutex
	clients map[string]*rate.Limiter
	// Since the last line: refusals of a wrong token, answers 429,
	// refusals of requests presenting nothing, and the addresses they
	// came from.
	lastLine                   time.Time
	failed, throttled, noToken int
	addresses                  map[string]bool
}

func newThrottle(burst int, now func() time.Time, log *slog.Logger) *throttle {
	return &throttle{burst: burst, now: now, log: log, clients: map[string]*rate.Limiter{}, addresses: map[string]bool{}}
}

// clientKey is the address r is throttled by: the TCP peer's IP (never
// X-Forwarded-For, which a client can set), an IPv6 one by its /64, which
// one client commonly holds whole.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// wait returns how long the address must wait before a token of its is
// looked at again; 0 when it may try now.
func (t *throttle) wait(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim, ok := t.clients[key]
	if !ok {
		return 0
	}
	now := t.now()
	if tokens := lim.TokensAt(now); tokens < 1 {
		return time.Duration(math.Ceil((1-tokens)*float64(failureEvery)/float64(time.Second))) * time.Second
	}
	return 0
}

// Kinds of refusal the log line counts.
const (
	refusedWrongToken = iota // a wrong token or session (counted against its address)
	refusedThrottled         // a 429
	refusedNoToken           // a 401 to a request presenting nothing
)

// refuse records a refusal of kind from the address key (a wrong token
// takes one of its tries) and logs, when the last line is
// failureLogEvery old, one line with the counts since, attrs (the
// request's) and status_code.
func (t *throttle) refuse(ctx context.Context, key string, kind, statusCode int, attrs []any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	switch kind {
	case refusedWrongToken:
		lim, ok := t.clients[key]
		if !ok {
			t.makeRoom()
			lim = rate.NewLimiter(rate.Every(failureEvery), t.burst)
			t.clients[key] = lim
		}
		lim.AllowN(now, 1)
		t.failed++
	case refusedThrottled:
		t.throttled++
	default:
		t.noToken++
	}
	if len(t.addresses) < 100 {
		t.addresses[key] = true
	}
	if now.Sub(t.lastLine) < failureLogEvery {
		return
	}
	addrs := make([]string, 0, len(t.addresses))
	for a := range t.addresses {
		addrs = append(addrs, a)
	}
	t.log.With(attrs...).WarnContext(ctx, "admin request refused", slog.Int("status_code", statusCode),
		slog.String("sampling", "one line a minute at most, counting the refusals since the last: no token, a wrong or expired one, "+
			"or 429 (past "+strconv.Itoa(t.burst)+" wrong tokens from an address, one more try every "+failureEvery.String()+")"),
		slog.Int("wrong_tokens", t.failed), slog.Int("throttled", t.throttled), slog.Int("no_token", t.noToken), slog.Any("remotes", addrs))
	t.lastLine, t.failed, t.throttled, t.noToken = now, 0, 0, 0
	clear(t.addresses)
}

// makeRoom forgets addresses whose tries are all back, and any when
// that is not enough, once maxThrottled are remembered. Called with mu
// held.
func (t *throttle) makeRoom() {
	if len(t.clients) < maxThrottled {
		return
	}
	now := t.now()
	for k, lim := range t.clients {
		if lim.TokensAt(now) >= float64(t.burst) {
			delete(t.clients, k)
		}
	}
	for k := range t.clients {
		if len(t.clients) < maxThrottled {
			return
		}
		delete(t.clients, k)
	}
}

// presentsToken reports whether r presents a credential to check: a
// bearer header or a session cookie.
func presentsToken(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return true
	}
	_, err := r.Cookie(sessionCookie)
	return err == nil
}

// msgThrottled is the answer to an address out of tries.
const msgThrottled = "too many wrong admin tokens from this address: try again later (Retry-After)"

// tooMany answers an address out of tries: 429 with Retry-After, a page
// for a browser.
func (a *Admin) tooMany(c echo.Context, wait time.Duration) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
	if wantsHTML(c.Request()) {
		return a.render(c, http.StatusTooManyRequests, "refused", &refusedPage{Message: msgThrottled})
	}
	return echo.NewHTTPError(http.StatusTooManyRequests, msgThrottled)
}
