package verify

import (
	"encoding/base64"
	"encoding/hex"
)

var b64Strict = base64.StdEncoding.Strict()

// decodeHex decodes s, which must be exactly 2*len(dst) hex digits, into
// dst. It copies s into a stack buffer first so no allocation happens.
func decodeHex(dst []byte, s string) bool {
	var tmp [128]byte
	if len(s) != hex.EncodedLen(len(dst)) || len(s) > len(tmp) {
		return false
	}
	n := copy(tmp[:], s)
	_, err := hex.Decode(dst, tmp[:n])
	return err == nil
}

// decodeBase64 decodes s (standard alphabet, padded) into dst and reports
// whether it held exactly len(dst) bytes. Allocation-free like decodeHex.
func decodeBase64(dst []byte, s string) bool {
	var tmp [128]byte
	var out [96]byte
	if len(s) != base64.StdEncoding.EncodedLen(len(dst)) || len(s) > len(tmp) || len(dst) > 64 {
		return false
	}
	n := copy(tmp[:], s)
	m, err := b64Strict.Decode(out[:], tmp[:n])
	if err != nil || m != len(dst) {
		return false
	}
	copy(dst, out[:m])
	return true
}

// decodeBase64URL decodes s (URL alphabet, unpadded, as Sanity sends it)
// into dst and reports whether it held exactly len(dst) bytes.
// Allocation-free like decodeHex.
func decodeBase64URL(dst []byte, s string) bool {
	var tmp [128]byte
	var out [96]byte
	if len(s) != base64.RawURLEncoding.EncodedLen(len(dst)) || len(s) > len(tmp) || len(dst) > 64 {
		return false
	}
	n := copy(tmp[:], s)
	m, err := b64URLStrict.Decode(out[:], tmp[:n])
	if err != nil || m != len(dst) {
		return false
	}
	copy(dst, out[:m])
	return true
}

var b64URLStrict = base64.RawURLEncoding.Strict()
