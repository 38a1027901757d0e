package admin_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the bytes the server reads from its clients.
type countingListener struct {
	net.Listener
	read atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: &l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// zeros is an endless stream of '0' bytes, limited by io.LimitReader.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// chunked hides a reader's length, so the client sends it chunked and
// the server cannot refuse it by its Content-Length.
type chunked struct{ io.Reader }

// multipartBody is a multipart form with a token field and a file part of
// size bytes, streamed.
func multipartBody(size int64) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("token", "nope")
		fw, err := mw.CreateFormFile("file", "big.bin")
		if err == nil {
			_, err = io.Copy(fw, io.LimitReader(zeros{}, size))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType()
}

// TestLoginBodyLimits: the unauthenticated login route reads a few KiB at
// most. Tens of MiB of form, sent with or without a Content-Length, and
// a multipart file part (on POST and on GET) are answered 413 or 415
// quickly; the server reads a small fraction of them and never spools a
// file to the temp directory. Not parallel: it points TMPDIR at a
// directory of its own to watch it.
func TestLoginBodyLimits(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	b := setup(t, options{token: "limit-token"})

	l := &countingListener{Listener: newLocalListener(t)}
	srv := httptest.NewUnstartedServer(b.gw)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	// Watch the temp directory for spooled multipart files.
	var spooled atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
				spooled.Add(1)
			}
		}
	})

	const big = 30 << 20
	cases := []struct {
		name        string
		givenMethod string
		givenBody   func() (io.Reader, string)
		expectCodes []int
	}{
		{"urlencoded with Content-Length", "POST", func() (io.Reader, string) {
			return io.LimitReader(io.MultiReader(strings.NewReader("token="), zeros{}), big), "application/x-www-form-urlencoded"
		}, []int{http.StatusRequestEntityTooLarge}},
		{"urlencoded chunked", "POST", func() (io.Reader, string) {
			return chunked{io.LimitReader(io.MultiReader(strings.NewReader("token="), zeros{}), big)}, "application/x-www-form-urlencoded"
		}, []int{http.StatusRequestEntityTooLarge}},
		{"multipart file part", "POST", func() (io.Reader, string) { return multipartBody(2 * big) }, []int{http.StatusUnsupportedMediaType}},
		{"multipart file part on GET", "GET", func() (io.Reader, string) { return multipartBody(2 * big) }, []int{http.StatusOK, http.StatusRequestEntityTooLarge}},
	}
	for _, tc := range cases {
		before := l.read.Load()
		started := time.Now()
		body, contentType := tc.givenBody()
		code, err := send(srv.URL, tc.givenMethod, body, contentType)
		took := time.Since(started)
		read := l.read.Load() - before
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Contains(tc.expectCodes, code) {
			t.Errorf("%s: %d, want one of %v", tc.name, code, tc.expectCodes)
		}
		if read > 1<<20 {
			t.Errorf("%s: the server read %d bytes of the body, want at most 1 MiB", tc.name, read)
		}
		if took > 5*time.Second {
			t.Errorf("%s: answered after %s", tc.name, took)
		}
	}

	// Many at once: still a bounded read each.
	before := l.read.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			body := io.LimitReader(io.MultiReader(strings.NewReader("token="), zeros{}), big)
			if code, err := send(srv.URL, "POST", body, "application/x-www-form-urlencoded"); err != nil || code != http.StatusRequestEntityTooLarge {
				t.Errorf("parallel post: %d %v, want 413", code, err)
			}
		})
	}
	wg.Wait()
	if read := l.read.Load() - before; read > 8<<20 {
		t.Errorf("8 parallel posts of 30 MiB: the server read %d bytes, want at most 8 MiB", read)
	}
	close(stop)
	watch.Wait()
	if n := spooled.Load(); n > 0 {
		t.Errorf("the temp directory held files during %d looks", n)
	}

	// The real form still signs in.
	code, err := send(srv.URL, "POST", strings.NewReader("token=limit-token&next=%2Fadmin%2F"), "application/x-www-form-urlencoded")
	if err != nil || code != http.StatusSeeOther {
		t.Errorf("login with the right token: %d %v, want 303", code, err)
	}
}

// TestAdminBodyLimits: authenticated admin routes take a bounded body
// too, answered 413 past it.
func TestAdminBodyLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "tok"})
	huge := `{"source":"stripe","reason":"` + strings.Repeat("x", 1<<20) + `"}`
	for _, path := range []string{"/admin/replay", "/admin/events/stripe/evt_x/replay"} {
		req, _ := http.NewRequest("POST", b.srv.URL+path, strings.NewReader(huge))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s with 1 MiB of JSON: %d, want 413", path, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("POST", b.srv.URL+"/admin/view/stripe/evt_x/replay", bytes.NewReader(bytes.Repeat([]byte("a"), 1<<20)))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("replay form of 1 MiB: %d, want 413", resp.StatusCode)
	}
}

func newLocalListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// send sends body to /admin/login (with next= on GET) and returns the
// status. A server that answers before the body is sent and closes the
// connection still has its answer read.
func send(base, method string, body io.Reader, contentType string) (int, error) {
	req, err := http.NewRequest(method, base+"/admin/login?next=%2Fadmin%2F", body)
	if err != nil {
		return 0, err
	}
	if c, ok := body.(chunked); ok {
		req.Body = io.NopCloser(c.Reader)
		req.ContentLength = -1
	} else if lr, ok := body.(*io.LimitedReader); ok {
		req.ContentLength = lr.N
	}
	req.Header.Set("Content-Type", contentType)
	client := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s /admin/login: %w", method, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
