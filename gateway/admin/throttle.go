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
// nothing (a browser on its way to the login page) is not counted.
// Refusals are logged as one line per failureLogEvery with their counts,
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
	// Since the last line: refusals of a wrong token, answers 429, and
	// the addresses they came from.
	lastLine          time.Time
	failed, throttled int
	addresses         map[string]bool
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

// fail counts a wrong token from the address.
func (t *throttle) fail(ctx context.Context, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim, ok := t.clients[key]
	if !ok {
		t.makeRoom()
		lim = rate.NewLimiter(rate.Every(failureEvery), t.burst)
		t.clients[key] = lim
	}
	lim.AllowN(t.now(), 1)
	t.failed++
	t.note(ctx, key)
}

// refused counts a 429.
func (t *throttle) refused(ctx context.Context, key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.throttled++
	t.note(ctx, key)
}

// note adds key to the addresses of this period and writes the period's
// line when the last one is failureLogEvery old. Called with mu held.
func (t *throttle) note(ctx context.Context, key string) {
	if len(t.addresses) < 100 {
		t.addresses[key] = true
	}
	now := t.now()
	if now.Sub(t.lastLine) < failureLogEvery {
		return
	}
	addrs := make([]string, 0, len(t.addresses))
	for a := range t.addresses {
		addrs = append(addrs, a)
	}
	t.log.WarnContext(ctx, "admin requests refused: wrong or expired token (one line a minute at most; 429 past "+
		strconv.Itoa(t.burst)+" wrong tokens from an address, one more try every "+failureEvery.String()+")",
		slog.Int("wrong_tokens", t.failed), slog.Int("throttled", t.throttled), slog.Any("remotes", addrs))
	t.lastLine, t.failed, t.throttled = now, 0, 0
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
