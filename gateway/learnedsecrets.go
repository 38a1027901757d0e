package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// handshakeSecrets keeps the signing secrets senders deliver in their
// handshakes (Asana's X-Hook-Secret); *dedupe.Store satisfies it.
type handshakeSecrets interface {
	LearnHandshakeSecret(ctx context.Context, source, secret string) (string, error)
	HandshakeSecret(ctx context.Context, source string) (string, error)
}

// learnedSecrets hands each learning source's Verifier
// (verify.SecretLearner) the secret stored for it: read before its first
// verification, and read again (at most every learnedReload) when a
// signature does not verify, so a secret another replica learned, or
// that an operator reset, is picked up.
type learnedSecrets struct {
	store handshakeSecrets
	mu    sync.Mutex
	read  map[string]time.Time // source -> when its secret was last read
}

const learnedReload = 5 * time.Second

func newLearnedSecrets(store handshakeSecrets) *learnedSecrets {
	return &learnedSecrets{store: store, read: map[string]time.Time{}}
}

// load reads source's stored secret into l unless it was read within
// learnedReload (always, when force is false and it was never read).
func (ls *learnedSecrets) load(ctx context.Context, log *slog.Logger, source string, l verify.SecretLearner, force bool) {
	if ls == nil || ls.store == nil {
		return
	}
	ls.mu.Lock()
	last, seen := ls.read[source]
	due := !seen || force && time.Since(last) > learnedReload
	if due {
		ls.read[source] = time.Now()
	}
	ls.mu.Unlock()
	if !due {
		return
	}
	secret, err := ls.store.HandshakeSecret(ctx, source)
	if err != nil {
		log.WarnContext(ctx, "could not read the source's handshake secret", slog.String("error", err.Error()))
		ls.mu.Lock()
		delete(ls.read, source)
		ls.mu.Unlock()
		return
	}
	if secret != "" {
		l.LearnSecret(secret)
	}
}

// learn stores secret as source's handshake secret. It returns
// verify.ErrHandshakeRefused when the source already holds another one:
// the first handshake's secret stays (SECURITY.md).
func (ls *learnedSecrets) learn(ctx context.Context, source string, l verify.SecretLearner, secret string) error {
	if ls == nil || ls.store == nil {
		return fmt.Errorf("handshake secrets are not stored by this process: %w", ErrUnavailable)
	}
	stored, err := ls.store.LearnHandshakeSecret(ctx, source, secret)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if stored != secret {
		return fmt.Errorf("X-Hook-Secret: the source already holds the secret of an earlier handshake (an operator resets it): %w", verify.ErrHandshakeRefused)
	}
	l.LearnSecret(secret)
	return nil
}
