package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// fairActive is how long a fair_by value counts as active after its last
// call ended or its last call was held: a value with nothing waiting
// stops taking a share of the destination soon after.
const fairActive = 2 * time.Second

// fairCacheSize bounds the fair_by values a handler remembers; past it,
// the cache starts again empty.
const fairCacheSize = 100_000

// fairCache remembers the fair_by value of each key's event, so a call
// held many times reads its event from Postgres once per process.
type fairCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *fairCache) get(k string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *fairCache) put(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= fairCacheSize {
		c.m = make(map[string]string)
	}
	c.m[k] = v
}

// fairValue returns the value p's event shares dest's concurrency by
// (fair_by), read from the event as stored in Postgres (so it is the
// same in every process and after any crash), "" when dest has no
// fair_by or the event cannot be read (the call then takes any free
// slot; the claim says what is wrong). An event without the field shares
// as one value of its own. The value is prefixed, so "" never is one.
func (h *Handler) fairValue(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination) string {
	if dest.FairBy == nil {
		return ""
	}
	k := p.Key() + "\x00" + dest.FairBy.String()
	if v, ok := h.fair.get(k); ok {
		return v
	}
	headers, payload, err := h.store.EventContent(ctx, p.Source, p.EventID)
	if err != nil {
		log.WarnContext(ctx, "could not read the event's fair_by value; the call is not shared fairly", slog.String("error", err.Error()))
		return ""
	}
	var hdr http.Header
	_ = json.Unmarshal(headers, &hdr)
	v, err := dest.FairBy.Extract(hdr, payload)
	if err != nil {
		v = ""
	}
	v = "v:" + v
	h.fair.put(k, v)
	return v
}

// fairKeys are the Redis keys of a fair_by value's share of the
// destination whose keys begin with prefix: its slots, the active values
// (shared by all values), its waiters, its rate. The value is hashed: a
// tenant's name, however long, makes a short key.
func fairKeys(prefix, value string) []string {
	sum := sha256.Sum256([]byte(value))
	v := prefix + "fair:" + hex.EncodeToString(sum[:8])
	return []string{v + ":slots", prefix + "fairvalues", v + ":waiters", v + ":rate"}
}
