package glob_test

import (
	"context"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/internal/glob"
	"github.com/webhookd/webhookd/internal/testkit/pgtest"
)

var matches = []struct {
	givenPattern, whenType string
	expectMatch            bool
}{
	{"charge.refunded", "charge.refunded", true},
	{"charge.refunded", "charge.refunded.x", false},
	{"charge.refunded", "xcharge.refunded", false},
	{"charge.*", "charge.refunded", true},
	{"charge.*", "charge.", true},
	{"charge.*", "charge", false},
	{"charge.*", "payment.charge.x", false},
	{"orders/*", "orders/create", true},
	{"orders/*", "orders/paid/partially", true},
	{"*", "anything.at/all", true},
	{"*.succeeded", "payment_intent.succeeded", true},
	{"*.succeeded", "payment_intent.succeeded.not", false},
	{"a*b*c", "abc", true},
	{"a*b*c", "aXbYbZc", true},
	{"a*b*c", "acb", false},
	{"ab*ba", "aba", false},
	{"100%_*", "100%_x", true},
	{"100%_*", "100ab_x", false},
	{"a_c", "abc", false},
	{"**", "", true},
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, m := range matches {
		p, err := glob.Compile(m.givenPattern)
		if err != nil {
			t.Fatalf("%q: %v", m.givenPattern, err)
		}
		if got := p.Match(m.whenType); got != m.expectMatch {
			t.Errorf("%q matches %q = %v, want %v", m.givenPattern, m.whenType, got, m.expectMatch)
		}
	}
}

// TestLikeAgrees: Postgres's LIKE on Pattern.Like matches what Match
// does, so the state Postgres computes and the runs the relay makes agree.
func TestLikeAgrees(t *testing.T) {
	t.Parallel()
	s := pgtest.New(t)
	for _, m := range matches {
		p, _ := glob.Compile(m.givenPattern)
		var got bool
		if err := s.Pool.QueryRow(context.Background(), `SELECT $1::text LIKE $2::text`, m.whenType, p.Like()).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != m.expectMatch {
			t.Errorf("%q LIKE %q = %v, want %v", m.whenType, p.Like(), got, m.expectMatch)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "charge.?", "[ab]", "{a,b}", `a\*`, "tab\there", string([]byte{0xff}), string(make([]byte, 256))} {
		if _, err := glob.Compile(bad); !errors.Is(err, glob.ErrInvalid) {
			t.Errorf("Compile(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := glob.CompileFilter([]string{}); !errors.Is(err, glob.ErrInvalid) {
		t.Errorf("empty filter: %v, want ErrInvalid", err)
	}
}

func TestFilterWants(t *testing.T) {
	t.Parallel()
	var all glob.Filter
	if !all.Wants("x") || !all.Wants("") {
		t.Error("no filter must want every event, typed or not")
	}
	f, err := glob.CompileFilter([]string{"charge.*", "payout.paid"})
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]bool{"charge.refunded": true, "payout.paid": true, "payout.failed": false, "": false} {
		if got := f.Wants(typ); got != want {
			t.Errorf("Wants(%q) = %v, want %v", typ, got, want)
		}
	}
}
