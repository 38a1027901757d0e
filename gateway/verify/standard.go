package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Canonical header keys (net/http canonicalizes received headers) and the
// names used in error messages.
const (
	standardIDHeader        = "Webhook-Id"
	standardTimestampHeader = "Webhook-Timestamp"
	standardSigHeader       = "Webhook-Signature"
	svixIDHeader            = "Svix-Id"
	svixTimestampHeader     = "Svix-Timestamp"
	svixSigHeader           = "Svix-Signature"

	standardSecretPrefix = "whsec_"
)

type standardHeaders struct{ id, ts, sig string }

var (
	standardNames = standardHeaders{"webhook-id", "webhook-timestamp", "webhook-signature"}
	svixNames     = standardHeaders{"svix-id", "svix-timestamp", "svix-signature"}
)

// standardScheme verifies Standard Webhooks (and Svix) signatures.
type standardScheme struct {
	macs []*mac
	tol  int64
}

func decodeStandardSecret(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, standardSecretPrefix))
	if err != nil {
		return nil, errors.New("want whsec_<base64> (the part after whsec_ is not valid base64)")
	}
	if len(k) == 0 {
		return nil, errors.New("want whsec_<base64> (key is empty)")
	}
	return k, nil
}

// parseStandardHeader checks a webhook-signature value: space-separated
// "<version>,<signature>" items. It returns how many are v1.
func parseStandardHeader(name, v string) (v1 int, err error) {
	items := 0
	for rest := v; ; {
		item, next, more := strings.Cut(rest, " ")
		if item != "" {
			ver, sig, ok := strings.Cut(item, ",")
			if !ok || ver == "" || sig == "" {
				return 0, malformed(name, `want space-separated "v1,<base64>" items`)
			}
			items++
			if ver == "v1" {
				v1++
			}
		}
		if !more {
			break
		}
		rest = next
	}
	if items == 0 {
		return 0, malformed(name, `want space-separated "v1,<base64>" items`)
	}
	return v1, nil
}

func (s *standardScheme) Verify(r Request, now time.Time) error {
	names := standardNames
	sig := r.Header.Get(standardSigHeader)
	id, ts := r.Header.Get(standardIDHeader), r.Header.Get(standardTimestampHeader)
	if svixSigned(r.Header) {
		names = svixNames
		sig = r.Header.Get(svixSigHeader)
		id, ts = r.Header.Get(svixIDHeader), r.Header.Get(svixTimestampHeader)
	}
	switch {
	case sig == "":
		return missing(names.sig)
	case id == "":
		return missing(names.id)
	case ts == "":
		return missing(names.ts)
	}
	n, err := parseStandardHeader(names.sig, sig)
	if err != nil {
		return err
	}
	if err := checkTimestamp(names.ts, ts, now, s.tol); err != nil {
		return err
	}
	if n == 0 {
		return mismatch(names.sig)
	}
	if firstSigner(s.macs, r.Body, func(sum []byte) bool { return standardMatch(sig, sum) }, id, ".", ts, ".") < 0 {
		return mismatch(names.sig)
	}
	return nil
}

// writeSigned writes "<id>.<timestamp>.<body>", from the header names
// the sender used.
func (s *standardScheme) writeSigned(w io.Writer, r Request) bool {
	id, ts := r.Header.Get(standardIDHeader), r.Header.Get(standardTimestampHeader)
	if svixSigned(r.Header) {
		id, ts = r.Header.Get(svixIDHeader), r.Header.Get(svixTimestampHeader)
	}
	_, _ = io.WriteString(w, id+"."+ts+".")
	_, _ = w.Write(r.Body)
	return true
}

// svixSigned reports whether a Standard Webhooks request uses Svix's
// header names: a svix-signature and no webhook-signature. Verify then
// checks the svix-* headers.
func svixSigned(h http.Header) bool {
	return h.Get(standardSigHeader) == "" && h.Get(svixSigHeader) != ""
}

// EventHeaders returns the headers a source's event id and order fields
// are read from. For a standard source whose sender uses Svix's header
// names, the signed svix-id and svix-timestamp stand as Webhook-Id and
// Webhook-Timestamp, so header:webhook-id (the default event id) and
// header:webhook-timestamp read what was signed, whatever unsigned
// webhook-* headers a copy may carry. Other requests get h itself.
func EventHeaders(scheme string, h http.Header) http.Header {
	if !isStandard(scheme) || !svixSigned(h) {
		return h
	}
	c := h.Clone()
	c.Set(standardIDHeader, h.Get(svixIDHeader))
	c.Set(standardTimestampHeader, h.Get(svixTimestampHeader))
	return c
}

// standardMatch reports whether any v1 item of sig equals want.
func standardMatch(sig string, want []byte) bool {
	var got [sha256.Size]byte
	found := false
	for rest := sig; ; {
		item, next, more := strings.Cut(rest, " ")
		if b64, ok := strings.CutPrefix(item, "v1,"); ok {
			if decodeBase64(got[:], b64) && hmac.Equal(got[:], want) {
				found = true
			}
		}
		if !more {
			return found
		}
		rest = next
	}
}

func (s *standardScheme) sign(body []byte, now time.Time, msgID string) (http.Header, string, error) {
	if msgID == "" {
		return nil, "", errors.New("verify: scheme standard needs a message id (webhook-id)")
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	// One v1 signature per secret, space-separated: while a receiver
	// rotates, it accepts the call under the old secret or the new.
	sigs := make([]string, len(s.macs))
	for i, mac := range s.macs {
		st := mac.get()
		st.writeString(msgID + "." + ts + ".")
		st.h.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(st.finish())
		mac.put(st)
	}
	h := http.Header{}
	h.Set(standardIDHeader, msgID)
	h.Set(standardTimestampHeader, ts)
	h.Set(standardSigHeader, strings.Join(sigs, " "))
	return h, "", nil
}

// isStandard reports whether scheme is Standard Webhooks, by that name or
// a sender's (clerk, resend, polar).
func isStandard(scheme string) bool {
	switch scheme {
	case SchemeStandard, SchemeClerk, SchemeResend, SchemePolar:
		return true
	}
	return false
}

// newStandardSender builds the Standard Webhooks senders by name: Clerk
// and Resend (Svix) show whsec_<base64> secrets; Polar's dashboard secret
// is itself the key's bytes (its SDK's validateEvent base64-encodes it
// before handing it to the standardwebhooks library).
func newStandardSender(cfg Config, tol int64) (scheme, error) {
	keys := make([][]byte, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		if cfg.Scheme == SchemePolar {
			keys[i] = []byte(s)
			continue
		}
		k, err := decodeStandardSecret(s)
		if err != nil {
			return nil, fmt.Errorf("verify.secrets[%d]: %w", i, err)
		}
		keys[i] = k
	}
	return &standardScheme{macs: newMACs(keys, sha256New), tol: tol}, nil
}
