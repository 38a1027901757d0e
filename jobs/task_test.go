package jobs_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/jobs"
)

// TestKey: keys of ids without '#' are as they always were; an id's '#'
// is doubled, so no id can stand for another event's forced replay.
func TestKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		givenSource, givenDest, givenID string
		givenGeneration                 int
		expect                          string
	}{
		{"stripe", "billing", "evt_1", 1, "stripe:billing:evt_1"},
		{"stripe", "billing", "evt_1", 0, "stripe:billing:evt_1"},
		{"stripe", "billing", "evt_1", 2, "stripe:billing:evt_1#2"},
		{"hmac", "app", "urn:x:1", 1, "hmac:app:urn:x:1"},
		{"stripe", "billing", "X#2", 1, "stripe:billing:X##2"},
		{"stripe", "billing", "X#", 2, "stripe:billing:X###2"},
		{"a:b", "c#d", "e", 3, "a#:b:c##d:e#3"},
	} {
		if got := jobs.Key(tc.givenSource, tc.givenDest, tc.givenID, tc.givenGeneration); got != tc.expect {
			t.Errorf("Key(%q, %q, %q, %d) = %q, want %q", tc.givenSource, tc.givenDest, tc.givenID, tc.givenGeneration, got, tc.expect)
		}
	}
}

// FuzzKeyInjective: a key decodes back to the run it names, so two
// distinct runs never share a key.
func FuzzKeyInjective(f *testing.F) {
	f.Add("stripe", "billing", "X#2", 1)
	f.Add("stripe", "billing", "X", 2)
	f.Add("a:b", "c", "d:e#", 12)
	f.Add("s", "d", "##:#1", 0)
	f.Fuzz(func(t *testing.T, source, dest, id string, gen int) {
		key := jobs.Key(source, dest, id, gen)
		s, d, i, g, ok := parseKey(key)
		want := max(gen, 1)
		if !ok || s != source || d != dest || i != id || g != want {
			t.Fatalf("Key(%q, %q, %q, %d) = %q, which reads back as (%q, %q, %q, %d, %v)", source, dest, id, gen, key, s, d, i, g, ok)
		}
	})
}

// parseKey reads a key as jobs.Key writes it.
func parseKey(k string) (source, dest, id string, gen int, ok bool) {
	name := func() (string, bool) {
		var b strings.Builder
		for k != "" {
			c := k[0]
			switch {
			case c == ':':
				k = k[1:]
				return b.String(), true
			case c == '#' && len(k) > 1 && (k[1] == '#' || k[1] == ':'):
				b.WriteByte(k[1])
				k = k[2:]
			case c == '#':
				return "", false
			default:
				b.WriteByte(c)
				k = k[1:]
			}
		}
		return "", false
	}
	if source, ok = name(); !ok {
		return
	}
	if dest, ok = name(); !ok {
		return
	}
	var b strings.Builder
	for k != "" {
		switch {
		case strings.HasPrefix(k, "##"):
			b.WriteByte('#')
			k = k[2:]
		case k[0] == '#':
			n, err := strconv.Atoi(k[1:])
			if err != nil || n < 2 || strconv.Itoa(n) != k[1:] {
				return "", "", "", 0, false
			}
			return source, dest, b.String(), n, true
		default:
			b.WriteByte(k[0])
			k = k[1:]
		}
	}
	return source, dest, b.String(), 1, true
}
