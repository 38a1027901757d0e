package proctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresPair is a test-owned Postgres primary and a streaming standby
// made from it with pg_basebackup -R, each a postgres server on its own
// loopback port and data directory, both removed when the test ends.
// Replication is synchronous (synchronous_standby_names = '*'): a commit
// returns once the standby has it, so what the primary acknowledged
// survives the primary's crash.
//
// Postgres refuses to run as root, so when the test runs as root the
// servers and tools run as the user "postgres" (Debian's package makes
// it); otherwise as the test's own user.
type PostgresPair struct {
	// Primary and Standby are the two servers.
	Primary, Standby *Postgres
	// URL lists both hosts with target_session_attrs=read-write and
	// names the database "webhookd": whichever is the primary is used.
	URL string
}

// Postgres is one test-owned Postgres server.
type Postgres struct {
	// Port is its port on 127.0.0.1.
	Port int
	// Dir is its data directory.
	Dir string

	tb   testing.TB
	bin  string
	cred *syscall.Credential
	proc *Process
}

// StartPostgresPair starts a primary, creates the database "webhookd"
// on it, makes a standby with pg_basebackup -R, starts it, and turns on
// synchronous replication once the standby streams. It fails the test
// when the Postgres server programs are not installed.
func StartPostgresPair(tb testing.TB) *PostgresPair {
	tb.Helper()
	bin := postgresBin(tb)
	cred := postgresCredential(tb)
	root, err := os.MkdirTemp("", "webhookd-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(root) })
	if cred != nil {
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	primary := &Postgres{Port: FreePort(tb), Dir: filepath.Join(root, "primary"), tb: tb, bin: bin, cred: cred}
	primary.run("initdb", "-D", primary.Dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	primary.start("postgres-primary")
	primary.exec(tb, "postgres", "CREATE DATABASE webhookd")

	standby := &Postgres{Port: FreePort(tb), Dir: filepath.Join(root, "standby"), tb: tb, bin: bin, cred: cred}
	standby.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", standby.Dir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	standby.start("postgres-standby")
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := primary.count(tb, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the standby does not stream from the primary: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	primary.exec(tb, "postgres", "ALTER SYSTEM SET synchronous_standby_names = '*'")
	primary.exec(tb, "postgres", "SELECT pg_reload_conf()")
	return &PostgresPair{
		Primary: primary, Standby: standby,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/webhookd?sslmode=disable&target_session_attrs=read-write",
			primary.Port, standby.Port),
	}
}

// Crash stops the server at once (SIGQUIT, pg_ctl stop -m immediate):
// no checkpoint, clients cut off, as if its machine died.
func (p *Postgres) Crash() {
	p.proc.Signal(syscall.SIGQUIT)
	select {
	case <-p.proc.Done():
	case <-time.After(20 * time.Second):
		p.proc.Kill()
	}
}

// Promote makes a standby the primary (pg_ctl promote) and waits until
// it takes writes.
func (p *Postgres) Promote() {
	p.tb.Helper()
	p.run("pg_ctl", "promote", "-D", p.Dir, "-w", "-t", "30")
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := p.count(p.tb, "SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END")
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("standby still in recovery after promote: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL returns a URL of this server's database.
func (p *Postgres) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.Port, database)
}

// Int runs sql, which returns one integer, on database and returns it.
func (p *Postgres) Int(tb testing.TB, database, sql string, args ...any) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL(database))
	if err != nil {
		tb.Fatalf("connecting to postgres on %d: %v", p.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return n
}

// start runs the server in the foreground as a test process and waits
// until it takes connections. fsync is off: the tests crash servers, not
// machines.
func (p *Postgres) start(name string) {
	p.tb.Helper()
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.Dir, "-p", strconv.Itoa(p.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off",
		"-c", "max_connections=200", "-c", "wal_sender_timeout=5s", "-c", "wal_receiver_timeout=5s")
	cmd.Dir = filepath.Dir(p.Dir)
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	p.proc = startProcess(p.tb, name, cmd)
	// Stop it as pg_ctl stop -m immediate would before the process's own
	// cleanup kills what is left; SIGKILL alone leaves its backends.
	p.tb.Cleanup(p.Crash)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := p.count(p.tb, "SELECT 1")
		if err == nil {
			return
		}
		select {
		case <-p.proc.Done():
			p.tb.Fatalf("%s exited: %s", name, p.proc.Logs())
		default:
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("%s not accepting connections: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs one of Postgres's programs to its end as the server's user.
func (p *Postgres) run(program string, args ...string) {
	p.tb.Helper()
	cmd := exec.Command(filepath.Join(p.bin, program), args...)
	cmd.Dir = filepath.Dir(p.Dir)
	if p.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		p.tb.Fatalf("%s %v: %v\n%s", program, args, err, out)
	}
}

func (p *Postgres) exec(tb testing.TB, database, sql string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL(database))
	if err != nil {
		tb.Fatalf("connecting to postgres on %d: %v", p.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

func (p *Postgres) count(_ testing.TB, sql string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// postgresBin finds the newest Postgres server programs: the directory
// of initdb on PATH (links followed), else Debian's /usr/lib/postgresql/<version>/bin.
func postgresBin(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		// The real directory: a link on PATH may come alone.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[j]))))
		return vi > vj
	})
	if len(dirs) == 0 {
		tb.Fatal("Postgres's server programs (initdb, postgres, pg_basebackup, pg_ctl) are needed for this test (apt-get install postgresql)")
	}
	return filepath.Dir(dirs[0])
}

// postgresCredential returns the user "postgres" when the test runs as
// root (Postgres refuses root), else nil: run as the test's own user.
func postgresCredential(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		tb.Fatalf("running as root, Postgres needs the user postgres to run as (Debian's postgresql package makes it): %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}
