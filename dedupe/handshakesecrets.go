package dedupe

import (
	"context"
	"errors"
	"fmt"
)

// Handshake secrets (table handshake_secrets, migration 0024): a signing
// secret a sender delivers in its handshake (Asana's X-Hook-Secret). A
// source has at most one: the first handshake's. A later handshake with
// another secret does not replace it; an operator who re-creates the
// sender's webhook deletes the row first.

const learnHandshakeSecretSQL = `
WITH ins AS (
    INSERT INTO handshake_secrets (source, secret) VALUES ($1, $2)
    ON CONFLICT (source) DO NOTHING
    RETURNING secret
)
SELECT secret FROM ins
UNION ALL
SELECT secret FROM handshake_secrets WHERE source = $1 AND NOT EXISTS (SELECT 1 FROM ins)`

// LearnHandshakeSecret stores secret as source's handshake secret unless
// the source has one, and returns the source's secret: secret itself,
// or the one an earlier handshake stored. The database decides which
// handshake is first, also across replicas.
func (s *Store) LearnHandshakeSecret(ctx context.Context, source, secret string) (string, error) {
	var stored string
	err := s.pool.QueryRow(ctx, learnHandshakeSecretSQL, source, secret).Scan(&stored)
	if errors.Is(translate(err), ErrNotFound) {
		// Another handshake's insert committed while this one waited on
		// it: the statement's snapshot predates that row, a new one has it.
		if stored, err = s.HandshakeSecret(ctx, source); err == nil && stored == "" {
			err = ErrNotFound
		}
	}
	if err != nil {
		return "", fmt.Errorf("error storing handshake secret: %w", err)
	}
	return stored, nil
}

// HandshakeSecret returns source's handshake secret, or "" when no
// handshake delivered one yet.
func (s *Store) HandshakeSecret(ctx context.Context, source string) (string, error) {
	var secret string
	err := s.pool.QueryRow(ctx, `SELECT secret FROM handshake_secrets WHERE source = $1`, source).Scan(&secret)
	if err = translate(err); errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("error reading handshake secret: %w", err)
	}
	return secret, nil
}
