// Package adminclient is the operator commands' client of a running
// webhookd's admin API (events, replay, destinations, …): it calls the
// API with the admin token, says what an answer other than 2xx means for
// an operator, and prints the answers as tables (or as the API's JSON).
// The commands need neither the database nor Redis and change nothing
// but through the API.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// TokenEnv names the environment variable the operator commands read
// their admin token from.
const TokenEnv = "WEBHOOKD_ADMIN_TOKEN"

// DefaultServer is the gateway the operator commands talk to when
// neither --server nor a config file names one.
const DefaultServer = "http://127.0.0.1:8080"

// Client calls a running webhookd's admin API.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the webhookd at server (a base URL, or
// host:port) that sends token. It returns an error naming --server when
// server is no http(s) URL.
func New(server, token string) (*Client, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want a URL such as %s", server, DefaultServer)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, token: token, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// Server returns the base URL of the webhookd the client calls, without
// credentials (it names the server in output and state files).
func (c *Client) Server() *url.URL {
	u := *c.base
	u.User = nil
	return &u
}

// ServerOf returns the base URL of a webhookd listening on listen: on
// loopback when it names every interface.
func ServerOf(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen %q: %w (give --server)", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// APIError is an answer of the admin API other than 2xx, said for an
// operator.
type APIError struct {
	// Status is the answer's HTTP status.
	Status int
	// Msg says what it means and what to do.
	Msg string
}

func (e *APIError) Error() string { return e.Msg }

// Call sends method path?query with body (JSON, when not nil) and returns
// the answer's body. A 2xx answer, or a status in also, returns the body
// and a nil error; any other answer returns an *APIError that says what to
// do.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body any, also ...int) ([]byte, int, error) {
	target := c.base.String() + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, 0, fmt.Errorf("no webhookd answers at %s (connection refused): is it running? --server names another", c.base)
		}
		return nil, 0, fmt.Errorf("calling webhookd at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading webhookd's answer: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return raw, resp.StatusCode, nil
	}
	for _, s := range also {
		if resp.StatusCode == s {
			return raw, resp.StatusCode, nil
		}
	}
	return raw, resp.StatusCode, c.ErrorFor(resp.StatusCode, raw)
}

// ErrorFor says what an answer other than 2xx means for an operator.
func (c *Client) ErrorFor(status int, raw []byte) error {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && (e.Error != "" || e.Message != "") {
		msg = e.Error + e.Message
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	switch {
	case status == http.StatusUnauthorized && c.token == "":
		msg = fmt.Sprintf("webhookd at %s wants an admin token: set $%s (401: %s)", c.base, TokenEnv, msg)
	case status == http.StatusUnauthorized:
		msg = fmt.Sprintf("webhookd at %s refused the admin token in $%s (401: %s)", c.base, TokenEnv, msg)
	case status == http.StatusForbidden:
		msg = fmt.Sprintf("webhookd at %s refused this (403: %s); the token is $%s", c.base, msg, TokenEnv)
	default:
		msg = fmt.Sprintf("webhookd answered %d %s: %s", status, http.StatusText(status), msg)
	}
	return &APIError{Status: status, Msg: msg}
}

// Get calls GET and decodes the answer into out, returning the raw
// answer too (what --json prints).
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	raw, _, err := c.Call(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("webhookd's answer to %s is not what this webhookd expects: %w", path, err)
	}
	return raw, nil
}

// EventPath is an event's API path, its source and id escaped.
func EventPath(source, id string) string {
	return "/admin/events/" + url.PathEscape(source) + "/" + url.PathEscape(id)
}

// doneOrJSON says whether a command that called the API is done: when the
// call failed (err is returned) or asJSON asked for the API's JSON as it
// came (raw, printed to w).
func doneOrJSON(w io.Writer, raw []byte, err error, asJSON bool) (bool, error) {
	if err != nil {
		return true, err
	}
	if asJSON {
		return true, PrintJSON(w, raw)
	}
	return false, nil
}

// PrintJSON writes an API answer indented, as --json prints it.
func PrintJSON(w io.Writer, raw []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}
