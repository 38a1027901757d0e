package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/config"
)

// adminTokenEnv names the environment variable the operator commands
// read their admin token from.
const adminTokenEnv = "WEBHOOKD_ADMIN_TOKEN"

// defaultServer is the gateway the operator commands talk to when
// neither --server nor a config file names one.
const defaultServer = "http://127.0.0.1:8080"

// adminClient calls a running gateway's admin API for the operator
// commands (events, replay, destinations): they need neither the
// database URL nor Redis, and change nothing but through the API.
type adminClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

// addServerFlag adds --server to an operator command.
func addServerFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().String("server", "",
		"the running webhookd's base URL (default: the config's listen address, else "+defaultServer+"); the admin token is read from $"+adminTokenEnv)
}

// newAdminClient returns a client for the gateway --server names, else
// the one the config's listen address names (on loopback when it names
// every interface), else defaultServer when no config file is there.
func newAdminClient(cmd *cobra.Command) (*adminClient, error) {
	server, _ := cmd.Flags().GetString("server")
	if server == "" {
		var err error
		if server, err = serverFromConfig(cmd); err != nil {
			return nil, err
		}
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want a URL such as %s", server, defaultServer)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &adminClient{base: u, token: os.Getenv(adminTokenEnv), http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// serverFromConfig returns the base URL of the config's listen address.
func serverFromConfig(cmd *cobra.Command) (string, error) {
	path, _ := cmd.Flags().GetString("config")
	cfg, err := config.Load(path)
	if errors.Is(err, fs.ErrNotExist) && !cmd.Flags().Changed("config") {
		return defaultServer, nil
	}
	if err != nil {
		return "", fmt.Errorf("%w\n(the operator commands read only listen from it; --server names the gateway instead)", err)
	}
	host, port, err := net.SplitHostPort(cfg.Process.Listen)
	if err != nil {
		return "", fmt.Errorf("listen %q: %w (give --server)", cfg.Process.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// apiError is an answer of the admin API other than 2xx, said for an
// operator.
type apiError struct {
	Status int
	Msg    string
}

func (e *apiError) Error() string { return e.Msg }

// call sends method path?query with body (JSON, when not nil) and returns
// the answer's body. A 2xx answer, or a status in also, returns the body
// and a nil error; any other answer returns an *apiError that says what to
// do.
func (c *adminClient) call(ctx context.Context, method, path string, query url.Values, body any, also ...int) ([]byte, int, error) {
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
	return raw, resp.StatusCode, c.errorFor(resp.StatusCode, raw)
}

// errorFor says what an answer other than 2xx means for an operator.
func (c *adminClient) errorFor(status int, raw []byte) error {
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
		msg = fmt.Sprintf("webhookd at %s wants an admin token: set $%s (401: %s)", c.base, adminTokenEnv, msg)
	case status == http.StatusUnauthorized:
		msg = fmt.Sprintf("webhookd at %s refused the admin token in $%s (401: %s)", c.base, adminTokenEnv, msg)
	case status == http.StatusForbidden:
		msg = fmt.Sprintf("webhookd at %s refused this (403: %s); the token is $%s", c.base, msg, adminTokenEnv)
	default:
		msg = fmt.Sprintf("webhookd answered %d %s: %s", status, http.StatusText(status), msg)
	}
	return &apiError{Status: status, Msg: msg}
}

// get calls GET and decodes the answer into out, returning the raw
// answer too (what --json prints).
func (c *adminClient) get(ctx context.Context, path string, query url.Values, out any) ([]byte, error) {
	raw, _, err := c.call(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("webhookd's answer to %s is not what this webhookd expects: %w", path, err)
	}
	return raw, nil
}

// eventPath is an event's API path, its source and id escaped.
func eventPath(source, id string) string {
	return "/admin/events/" + url.PathEscape(source) + "/" + url.PathEscape(id)
}

// printJSON writes an API answer indented, as --json prints it.
func printJSON(w io.Writer, raw []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}
