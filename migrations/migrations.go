// Package migrations holds webhookd's numbered SQL schema migrations,
// embedded in the binary, and the one function that applies them.
//
// Files are named NNNN_description.up.sql / .down.sql and are never edited
// once landed; a schema change is a new number. Every process applies
// pending migrations at start, so Up serialises concurrent callers with a
// Postgres advisory lock: replicas starting at once apply each migration
// exactly once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// lockID is the advisory lock class that serialises migration runs; the
// lock's second key is the target schema's hash.
const lockID int32 = 0x77656264

// Up applies every pending migration to the database at databaseURL (a
// postgres:// URL or key=value string; a search_path parameter selects the
// schema). It returns the schema version reached.
func Up(ctx context.Context, databaseURL string) (uint, error) {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Up() })
}

// UpTo applies pending migrations up to and including version, for tests
// of a migration's data move (apply up to the one before it, write rows
// as the older schema would, then apply it). It returns the version
// reached.
func UpTo(ctx context.Context, databaseURL string, version uint) (uint, error) {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Migrate(version) })
}

// ErrSchemaMismatch is returned by Check when the database's schema is
// not the version this binary ships.
var ErrSchemaMismatch = errors.New("database schema does not match this binary")

// Latest returns the version of the newest embedded migration.
func Latest() uint {
	source, err := iofs.New(files, ".")
	if err != nil {
		panic(fmt.Sprintf("embedded migrations: %v", err))
	}
	defer source.Close()
	v, err := source.First()
	for err == nil {
		var next uint
		if next, err = source.Next(v); err == nil {
			v = next
		}
	}
	return v
}

// Check returns nil when the database at databaseURL is at Latest and no
// migration was left half applied, else an error wrapping
// ErrSchemaMismatch that says what to run. Commands that only read or
// replay call it instead of migrating, so an operator's command never
// changes the schema under running processes.
func Check(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("error connecting to check the schema: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var (
		version int64
		dirty   bool
	)
	err = conn.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01", errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: the database has no webhookd schema yet; run webhookd migrate (or start a webhookd process)", ErrSchemaMismatch)
	case err != nil:
		return fmt.Errorf("error reading the schema version: %w", err)
	case dirty:
		return fmt.Errorf("%w: migration %d was left half applied; see the migration's logs", ErrSchemaMismatch, version)
	case uint(version) != Latest():
		return fmt.Errorf("%w: the database is at version %d, this binary expects %d; run webhookd migrate with the newer of the two", ErrSchemaMismatch, version, Latest())
	}
	return nil
}

// DownTo reverts the applied migrations above version, for tests that
// check each down migration undoes its up. It returns the version
// reached; a schema below version is an error.
func DownTo(ctx context.Context, databaseURL string, version uint) (uint, error) {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error {
		current, _, err := m.Version()
		if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
			return err
		}
		switch {
		case current < version:
			return fmt.Errorf("schema is at version %d, below %d", current, version)
		case version == 0:
			return m.Down() // Migrate knows no version 0
		}
		return m.Migrate(version)
	})
}

// Down reverts every migration. It exists for tests and for operators
// removing webhookd; it deletes all data.
func Down(ctx context.Context, databaseURL string) (uint, error) {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Down() })
}

func run(ctx context.Context, databaseURL string, step func(*migrate.Migrate) error) (uint, error) {
	connConfig, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return 0, fmt.Errorf("error parsing database url: %w", err)
	}
	db := stdlib.OpenDB(*connConfig)
	defer db.Close()

	// golang-migrate takes its own lock only after creating its version
	// table; concurrent first starts would race on that CREATE. Hold ours
	// across the whole run on a dedicated connection.
	lockConn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("error connecting for migrations: %w", err)
	}
	defer lockConn.Close()
	if _, err := lockConn.ExecContext(ctx, "SELECT pg_advisory_lock($1, hashtext(current_schema()))", lockID); err != nil {
		return 0, fmt.Errorf("error taking migration lock: %w", err)
	}
	defer func() {
		_, _ = lockConn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, hashtext(current_schema()))", lockID)
	}()

	// The migration driver owns and closes its own *sql.DB.
	return migrateWith(stdlib.OpenDB(*connConfig), step)
}

func migrateWith(db *sql.DB, step func(*migrate.Migrate) error) (uint, error) {
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{})
	if err != nil {
		_ = db.Close()
		return 0, fmt.Errorf("error opening migration driver: %w", err)
	}
	source, err := iofs.New(files, ".")
	if err != nil {
		return 0, fmt.Errorf("error reading embedded migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", source, "pgx5", driver)
	if err != nil {
		_ = driver.Close()
		return 0, fmt.Errorf("error preparing migrations: %w", err)
	}
	defer m.Close()
	if err := step(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("error applying migrations: %w", err)
	}
	version, _, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("error reading schema version: %w", err)
	}
	return version, nil
}
