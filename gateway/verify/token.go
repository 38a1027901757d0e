package verify

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	telegramHeader = "X-Telegram-Bot-Api-Secret-Token"
	gitlabHeader   = "X-Gitlab-Token"
)

// tokenScheme verifies senders that sign nothing but send a shared token
// in a header: telegram (X-Telegram-Bot-Api-Secret-Token, the secret_token
// given to setWebhook) and gitlab (X-Gitlab-Token, the webhook's secret
// token). The token is compared in constant time with every configured
// one. A copy of a captured request verifies as well as the original:
// such a source relies on its event id for duplicates.
type tokenScheme struct {
	header string // canonical
	tokens []string
}

// newTelegram checks each token is one setWebhook accepts (1–256
// characters of A-Z, a-z, 0-9, _ and -).
func newTelegram(secrets []string) (scheme, error) {
	for i, s := range secrets {
		if len(s) > 256 || !telegramTokenChars(s) {
			return nil, fmt.Errorf("verify.secrets[%d]: Telegram's secret_token is 1-256 characters of A-Z, a-z, 0-9, _ and -", i)
		}
	}
	return &tokenScheme{header: telegramHeader, tokens: secrets}, nil
}

func telegramTokenChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func newGitLab(secrets []string) scheme {
	return &tokenScheme{header: gitlabHeader, tokens: secrets}
}

func (s *tokenScheme) Verify(r Request, _ time.Time) error {
	v := r.Header.Get(s.header)
	if v == "" {
		return missing(s.header)
	}
	if !equalToken(v, s.tokens) {
		return fmt.Errorf("%s: not a configured token: %w", s.header, ErrSignatureMismatch)
	}
	return nil
}

// writeSigned: a token signs nothing.
func (s *tokenScheme) writeSigned(io.Writer, Request) bool { return false }

func (s *tokenScheme) sign(_ []byte, _ time.Time, msgID string) (http.Header, string, error) {
	h := http.Header{}
	h.Set(s.header, s.tokens[0])
	if s.header == gitlabHeader && msgID != "" {
		h.Set(gitlabIdempotencyHeader, msgID)
	}
	return h, "", nil
}

const gitlabIdempotencyHeader = "Idempotency-Key"

// newBigCommerce: BigCommerce signs nothing; a webhook's custom headers
// (set when it is created) carry a token, in Config.Header (default
// Authorization), compared with every configured one.
func newBigCommerce(cfg Config) scheme {
	return &tokenScheme{header: http.CanonicalHeaderKey(cfg.Header), tokens: cfg.Secrets}
}
