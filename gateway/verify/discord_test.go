package verify

import (
	"crypto/ed25519"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"filippo.io/edwards25519"
)

// TestDiscordRefusesWeakKeys: a Discord public key that is a point of
// small order (the all-zero placeholder among them) or no point at all
// is refused at configuration (issue 23, L1). Before, only its length
// was checked, and under the all-zero key a signature (R = identity,
// S = 0) verified for one message in four: the test forges one first.
func TestDiscordRefusesWeakKeys(t *testing.T) {
	t.Parallel()
	zero := make([]byte, ed25519.PublicKeySize)
	identity := edwards25519.NewIdentityPoint().Bytes()
	forged := append(append([]byte{}, identity...), make([]byte, 32)...) // R = identity, S = 0
	tries := 0
	for ; tries < 64; tries++ {
		if ed25519.Verify(zero, []byte(strconv.Itoa(tries)+`{"type":1}`), forged) {
			break
		}
	}
	if tries == 64 {
		t.Fatal("no forgery under the all-zero key in 64 tries; the test's premise is wrong")
	}
	t.Logf("a signature with S = 0 verified under the all-zero key after %d tries", tries+1)

	weak := map[string][]byte{"all zero": zero}
	for i, p := range smallOrderPoints(t) {
		weak["small order "+strconv.Itoa(i)] = p.Bytes()
	}
	for y := byte(2); ; y++ {
		b := make([]byte, 32)
		b[0] = y
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			weak["not a point"] = b
			break
		}
	}
	for name, key := range weak {
		err := Config{Scheme: SchemeDiscord, Secrets: []string{discordTestKey(t), hex.EncodeToString(key)}}.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "verify.secrets[1]: ") {
			t.Errorf("%s key %x: Validate = %v, want verify.secrets[1] refused", name, key, err)
		}
	}
	if err := (Config{Scheme: SchemeDiscord, Secrets: []string{discordTestKey(t)}}).Validate(); err != nil {
		t.Errorf("a real key: Validate = %v", err)
	}
}

// smallOrderPoints returns the eight points of order dividing 8: the
// multiples of [L]Q for a point Q with a torsion part of order 8, found
// as [L-1]Q + Q (a scalar is taken modulo L).
func smallOrderPoints(t *testing.T) []*edwards25519.Point {
	t.Helper()
	lMinus1, err := edwards25519.NewScalar().SetCanonicalBytes(func() []byte {
		b, _ := hex.DecodeString("ecd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
		return b
	}())
	if err != nil {
		t.Fatal(err)
	}
	for y := byte(2); y < 255; y++ {
		b := make([]byte, 32)
		b[0] = y
		q, err := new(edwards25519.Point).SetBytes(b)
		if err != nil {
			continue
		}
		tor := new(edwards25519.Point).Add(new(edwards25519.Point).ScalarMult(lMinus1, q), q)
		var out []*edwards25519.Point
		p := edwards25519.NewIdentityPoint()
		for range 8 {
			p = new(edwards25519.Point).Add(p, tor)
			out = append(out, p)
		}
		distinct := map[string]bool{}
		for _, p := range out {
			distinct[string(p.Bytes())] = true
		}
		if len(distinct) == 8 {
			return out
		}
	}
	t.Fatal("no point with a torsion part of order 8")
	return nil
}

// discordTestKey returns a real public key, hex.
func discordTestKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(pub)
}
