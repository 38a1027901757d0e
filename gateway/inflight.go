package gateway

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// What the server holds for requests in flight is bounded twice: the
// webhook body bytes read and not yet answered (bodyBudget), and the open
// connections (limitListener). A body buffer grows as bytes arrive, never
// to the Content-Length a request declares before they do, so a
// connection that declares a large body and stalls holds what it sent,
// not what it promised. Past either bound the server answers 503, which
// senders retry, instead of growing until the process runs out of memory.
const (
	// DefaultMaxBodyBytesInFlight is Config.MaxBodyBytesInFlight's
	// floor: 64 MiB, or 8 bodies of MaxBodyBytes when that is more.
	DefaultMaxBodyBytesInFlight = 64 << 20
	// DefaultMaxConnections is Config.MaxConnections's default.
	DefaultMaxConnections = 4096
)

// ErrBusy is returned when the webhook bodies in flight already hold the
// server's budget (MaxBodyBytesInFlight): 503, the sender retries.
var ErrBusy = errors.New("server busy: too many request bodies in flight, retry later")

// bodyBudget counts the body bytes read by requests in flight.
type bodyBudget struct {
	used  atomic.Int64
	limit int64
}

// take holds n more bytes, or reports false (holding nothing) when that
// would pass the limit.
func (b *bodyBudget) take(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken.
func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// budgetReader holds every byte it reads against a bodyBudget.
type budgetReader struct {
	r      io.Reader
	budget *bodyBudget
	held   int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		if !b.budget.take(int64(n)) {
			return 0, ErrBusy
		}
		b.held += int64(n)
	}
	return n, err
}

// limitListener accepts at most max open connections; one more is
// answered 503 and closed at once, so a flood of idle or stalled
// connections costs a refusal each, not a goroutine and buffers each.
type limitListener struct {
	net.Listener
	open atomic.Int64
	max  int64
}

// busyAnswer is what a connection past the limit gets.
var busyAnswer = func() string {
	const body = `{"error":"server busy: too many connections, retry later"}`
	return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &limitedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		go refuse(c)
	}
}

// refuse answers a connection past the limit and closes it, giving the
// client a second at most to take the answer.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c, busyAnswer)
	_ = c.Close()
}

// limitedConn gives its place back once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
