package config

// Admin tokens in the config: admin_token, admin.tokens and
// admin.read_only_tokens, with their roles and checks.

import (
	"errors"
	"strings"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/internal/field"
)

// adminToken is one configured admin token and the key it came from.
type adminToken struct {
	value    string
	readOnly bool
	path     string
}

// adminTokens lists every configured admin token with its key:
// admin_token (when set), admin.tokens, admin.read_only_tokens.
func (f *File) adminTokens() []adminToken {
	var out []adminToken
	if f.AdminToken != "" {
		out = append(out, adminToken{value: f.AdminToken, path: "admin_token"})
	}
	for i, v := range f.Admin.Tokens {
		out = append(out, adminToken{value: v, path: field.Index("admin.tokens", i)})
	}
	for i, v := range f.Admin.ReadOnlyTokens {
		out = append(out, adminToken{value: v, readOnly: true, path: field.Index("admin.read_only_tokens", i)})
	}
	return out
}

// HasAdminTokens reports whether the file configures any admin token.
func (f *File) HasAdminTokens() bool { return len(f.adminTokens()) > 0 }

// tokenKey names t's key, or the environment variable that set it.
func (c *Config) tokenKey(t adminToken) string {
	if env := c.fromEnv[t.path]; env != "" {
		return env
	}
	return t.path
}

// validateAdmin checks the admin tokens (each usable, none listed twice,
// none both full and read-only) and that tokenless access is not asked
// for beside them.
func (c *Config) validateAdmin() error {
	tokens := c.File.adminTokens()
	seen := make(map[string]adminToken, len(tokens))
	var keys []string
	var errs []error
	for _, t := range tokens {
		keys = append(keys, c.tokenKey(t))
		if err := admin.CheckToken(t.value); err != nil {
			errs = append(errs, &field.Error{Path: t.path, Err: err})
			continue
		}
		if first, dup := seen[t.value]; dup {
			if first.readOnly != t.readOnly {
				errs = append(errs, field.Errorf(t.path, "the same token is also listed as %s: a token is either full or read-only", c.tokenKey(first)))
			} else {
				errs = append(errs, field.Errorf(t.path, "duplicates %s", c.tokenKey(first)))
			}
			continue
		}
		seen[t.value] = t
	}
	if c.File.Admin.UnsafeTokenlessLoopback && len(tokens) > 0 {
		errs = append(errs, field.Errorf("admin.unsafe_tokenless_loopback", "cannot be combined with admin tokens (%s set): with a token admin needs it; "+
			"remove admin.unsafe_tokenless_loopback or the tokens", strings.Join(keys, ", ")))
	}
	return errors.Join(errs...)
}

// fullAdminTokens is admin_token (when set) and admin.tokens.
func (f *File) fullAdminTokens() []string {
	var out []string
	if f.AdminToken != "" {
		out = append(out, f.AdminToken)
	}
	return append(out, f.Admin.Tokens...)
}
