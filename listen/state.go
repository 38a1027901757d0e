package listen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// state is what the state file keeps between runs: where to resume.
type state struct {
	// Server is the gateway the cursor belongs to, without credentials.
	Server string `json:"server"`
	// Cursor is the position of the last event handled (answered by the
	// local app); the stream resumes after it.
	Cursor string `json:"cursor,omitempty"`
	// Inflight is the event being forwarded, set before each call to the
	// local app: after a crash its next call says how many came before
	// (Webhookd-Attempt).
	Inflight *inflight `json:"inflight,omitempty"`
	// UpdatedAt is when the file was last written.
	UpdatedAt time.Time `json:"updated_at"`
}

// inflight is an event whose forwarding started.
type inflight struct {
	Cursor string `json:"cursor"`
	// Calls counts the calls made to the local app for it so far,
	// this one included.
	Calls int `json:"calls"`
}

// DefaultStatePath returns the state file for a gateway: one per server,
// under the user's config directory
// (<config dir>/webhookd/listen/<host>-<hash>.json).
func DefaultStatePath(server *url.URL) (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory for the state file (give --state): %w", err)
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, strings.ToLower(server.Host))
	sum := sha256.Sum256([]byte(serverID(server)))
	return filepath.Join(dir, "webhookd", "listen", name+"-"+hex.EncodeToString(sum[:4])+".json"), nil
}

// serverID names a gateway in the state file: its URL without
// credentials, query or fragment.
func serverID(server *url.URL) string {
	u := *server
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimSuffix(u.String(), "/")
}

// loadState reads the state file at path; a missing file is an empty
// state.
func loadState(path string) (state, error) {
	var st state
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("error reading the state file: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("the state file %s does not parse (remove it, or give --from): %w", path, err)
	}
	return st, nil
}

// saveState writes st to path: to a temporary file beside it, then
// renamed over it, so a process killed at any instant leaves the old
// state or the new one, never a torn file. Not synced to disk: it must
// survive the process, not the machine (after a power loss the stream
// resumes a little earlier, and the app sees those events again with
// their keys).
func saveState(path string, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("error creating the state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("error writing the state file: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("error writing the state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("error writing the state file: %w", err)
	}
	return nil
}
