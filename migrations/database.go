package migrations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// EnsureDatabase creates the database named in databaseURL when it does
// not exist yet, by connecting to the server's "postgres" database (what
// `webhookd demo` does on a fresh machine). It migrates nothing.
func EnsureDatabase(ctx context.Context, databaseURL string, log *slog.Logger) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err == nil {
		return conn.Close(ctx)
	}
	if !isUndefinedDatabase(err) {
		return fmt.Errorf("error connecting to postgres: %w", err)
	}
	cc, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("error parsing database_url: %w", err)
	}
	name := cc.Database
	cc.Database = "postgres"
	admin, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("error connecting to create database %q: %w", name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("error creating database %q: %w", name, err)
	}
	log.InfoContext(ctx, "created database", slog.String("database", name))
	return nil
}

// isUndefinedDatabase reports whether err says the database does not exist.
func isUndefinedDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}
