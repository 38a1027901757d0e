package suggest_test

import (
	"testing"

	"github.com/webhookd/webhookd/internal/suggest"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	keys := []string{"listen", "lease", "retention", "redis_url", "timeout", "max_attempts"}
	for _, tc := range []struct {
		given, expect string
		expectOK      bool
	}{
		{"lsiten", "listen", true},
		{"timeot", "timeout", true},
		{"retension", "retention", true},
		{"max_attempt", "max_attempts", true},
		{"zzz", "", false},
		{"database", "", false},
	} {
		got, ok := suggest.Closest(tc.given, keys)
		if ok != tc.expectOK || ok && got != tc.expect {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.given, got, ok, tc.expect, tc.expectOK)
		}
	}
}
