package main

// Admin tokens in the config: admin_token, admin.tokens and
// admin.read_only_tokens, with their roles and checks.

import (
	"strings"

	"github.com/webhookd/webhookd/gateway/admin"
)

// adminToken is one configured admin token and the key it came from.
type adminToken struct {
	value    string
	readOnly bool
	path     []any // its key, for fieldError
}

// adminTokens lists every configured admin token with its key:
// admin_token (when set), admin.tokens, admin.read_only_tokens.
func (c *config) adminTokens() []adminToken {
	var out []adminToken
	if c.AdminToken != "" {
		out = append(out, adminToken{value: c.AdminToken, path: []any{"admin_token"}})
	}
	for i, v := range c.Admin.Tokens {
		out = append(out, adminToken{value: v, path: []any{"admin", "tokens", i}})
	}
	for i, v := range c.Admin.ReadOnlyTokens {
		out = append(out, adminToken{value: v, readOnly: true, path: []any{"admin", "read_only_tokens", i}})
	}
	return out
}

// tokenError names the key of t (or the environment variable it came
// from) in an error.
func (c *config) tokenError(t adminToken, msg string) error {
	return c.fieldError(msg, t.path...)
}

// tokenKey names t's key, or the environment variable that set it.
func (c *config) tokenKey(t adminToken) string {
	key := keyPath(t.path...)
	if env := c.fromEnv[key]; env != "" {
		return env
	}
	return key
}

// validateAdmin checks the admin tokens (each usable, none listed twice,
// none both full and read-only) and that tokenless access is not asked
// for beside them.
func (c *config) validateAdmin() error {
	tokens := c.adminTokens()
	seen := make(map[string]adminToken, len(tokens))
	var keys []string
	for _, t := range tokens {
		if err := admin.CheckToken(t.value); err != nil {
			return c.tokenError(t, err.Error())
		}
		if first, dup := seen[t.value]; dup {
			if first.readOnly != t.readOnly {
				return c.tokenError(t, "the same token is also listed as "+c.tokenKey(first)+": a token is either full or read-only")
			}
			return c.tokenError(t, "duplicates "+c.tokenKey(first))
		}
		seen[t.value] = t
		keys = append(keys, c.tokenKey(t))
	}
	if c.Admin.UnsafeTokenlessLoopback && len(tokens) > 0 {
		return c.fieldError("cannot be combined with admin tokens ("+strings.Join(keys, ", ")+
			" set): with a token admin needs it; remove admin.unsafe_tokenless_loopback or the tokens",
			"admin", "unsafe_tokenless_loopback")
	}
	return nil
}

// fullAdminTokens is admin_token (when set) and admin.tokens.
func (c *config) fullAdminTokens() []string {
	var out []string
	if c.AdminToken != "" {
		out = append(out, c.AdminToken)
	}
	return append(out, c.Admin.Tokens...)
}
