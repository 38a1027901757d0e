package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// genericScheme is the configurable HMAC: the hmac and hmac-sha256
// schemes, and every sender that is a preset of it (senders.go). A
// signature header holds the encoded HMAC of a signed-content template
// (literal text, the body, the timestamp, the method, the URL, headers),
// either alone behind a prefix or as one or more values of a key in a
// header of k=v pairs ("t=…,v1=…"); the timestamp, when there is one, is
// checked against the tolerance in its own header or in that list.
type genericScheme struct {
	macs     []*mac
	tol      int64
	header   string // canonical
	tsHeader string // canonical; "" when the timestamp is not in a header of its own
	base64   bool   // standard base64 (else hex, or base64url when urlB64)
	urlB64   bool   // unpadded base64url
	prefix   string
	segments []segment

	// size is the length of the HMAC in bytes: 20, 32 or 64. Zero
	// means 32 (the presets built before SHA-1 and SHA-512).
	size int
	// sigKey, when set, makes the header a list of k=v pairs whose
	// sigKey values are signatures (any may match, as senders rotate);
	// tsKey names the timestamp in that list.
	sigKey, tsKey string
	// tsFormat is how the timestamp reads.
	tsFormat timestampFormat
	// numbered: the signature headers are header-1, header-2, … (one per
	// key the sender signs with, DocuSign's rotation).
	numbered []string
	// publicURL is {url}: the URL as the sender sees it.
	publicURL string
	// signHeaders are set by sign (what the sender always sends, such
	// as a message type); idHeaders are set to the message id.
	signHeaders http.Header
	idHeaders   []string
}

type segmentKind uint8

const (
	segLiteral segmentKind = iota
	segBody
	segTimestamp
	segMethod
	segURL
	segHeader
)

type segment struct {
	kind segmentKind
	lit  []byte // the literal, or the canonical header name of segHeader
}

// timestampFormat says how a signed timestamp reads.
type timestampFormat uint8

const (
	tsUnix    timestampFormat = iota // unix seconds
	tsUnixMS                         // unix milliseconds
	tsRFC3339                        // RFC 3339, or without zone (UTC), as Orb sends it
)

// Hash algorithms of Config.Algorithm.
const (
	AlgorithmSHA1   = "sha1"
	AlgorithmSHA256 = "sha256"
	AlgorithmSHA512 = "sha512"
)

// Timestamp formats of Config.TimestampFormat.
const (
	TimestampUnix    = "unix"
	TimestampUnixMS  = "unix_ms"
	TimestampRFC3339 = "rfc3339"
)

// maxSignatures bounds the signatures read from one request (rotation
// lists): more are ignored.
const maxSignatures = 8

func hashOf(name string) (func() hash.Hash, int, bool) {
	switch name {
	case AlgorithmSHA1:
		return sha1.New, sha1.Size, true
	case AlgorithmSHA256, "":
		return sha256New, sha256.Size, true
	case AlgorithmSHA512:
		return sha512.New, sha512.Size, true
	}
	return nil, 0, false
}

func newGeneric(cfg Config, keys [][]byte, tol int64) (scheme, error) {
	if !httpguts.ValidHeaderFieldName(cfg.Header) {
		return nil, errors.New("verify.header: not a valid header name")
	}
	if cfg.TimestampHeader != "" && !httpguts.ValidHeaderFieldName(cfg.TimestampHeader) {
		return nil, errors.New("verify.timestamp_header: not a valid header name")
	}
	newHash, size, ok := hashOf(cfg.Algorithm)
	if !ok {
		return nil, fmt.Errorf("verify.algorithm: %q is not sha1, sha256 or sha512", cfg.Algorithm)
	}
	if cfg.Scheme == SchemeHMACSHA256 && cfg.Algorithm != "" && cfg.Algorithm != AlgorithmSHA256 {
		return nil, errors.New("verify.algorithm: hmac-sha256 is SHA-256; use scheme hmac for another")
	}
	s := &genericScheme{
		tol:       tol,
		header:    http.CanonicalHeaderKey(cfg.Header),
		prefix:    *cfg.Prefix,
		size:      size,
		sigKey:    cfg.SignatureKey,
		tsKey:     cfg.TimestampKey,
		publicURL: cfg.PublicURL,
	}
	switch cfg.Encoding {
	case "hex":
	case "base64":
		s.base64 = true
	case "base64url":
		s.urlB64 = true
	default:
		return nil, fmt.Errorf("verify.encoding: %q is not hex, base64 or base64url", cfg.Encoding)
	}
	switch cfg.TimestampFormat {
	case "", TimestampUnix:
	case TimestampUnixMS:
		s.tsFormat = tsUnixMS
	case TimestampRFC3339:
		s.tsFormat = tsRFC3339
	default:
		return nil, fmt.Errorf("verify.timestamp_format: %q is not unix, unix_ms or rfc3339", cfg.TimestampFormat)
	}
	if s.tsKey != "" && s.sigKey == "" {
		return nil, errors.New("verify.timestamp_key: needs verify.signature_key (the timestamp is a key of the signature header)")
	}
	if s.tsKey != "" && cfg.TimestampHeader != "" {
		return nil, errors.New("verify.timestamp_key: the timestamp is either in the signature header or in verify.timestamp_header, not both")
	}
	hasTS := cfg.TimestampHeader != "" || s.tsKey != ""
	segs, err := parseTemplate(cfg.SignedContent, hasTS)
	if err != nil {
		return nil, fmt.Errorf("verify.signed_content: %w", err)
	}
	for _, seg := range segs {
		if seg.kind == segTimestamp && seg.lit != nil { // {timestamp_ms}
			if cfg.TimestampFormat != "" && cfg.TimestampFormat != TimestampUnixMS {
				return nil, errors.New("verify.signed_content: {timestamp_ms} reads unix milliseconds, not verify.timestamp_format " + cfg.TimestampFormat)
			}
			s.tsFormat = tsUnixMS
		}
		if seg.kind == segURL && cfg.PublicURL == "" {
			return nil, errors.New("verify.public_url: required by {url} in verify.signed_content (the URL as the sender sees it)")
		}
		if seg.kind == segHeader {
			s.idHeaders = append(s.idHeaders, string(seg.lit))
		}
	}
	if hasTS && !slices.ContainsFunc(segs, func(s segment) bool { return s.kind == segTimestamp }) {
		// The timestamp would be checked against the clock but not
		// signed: a replay could carry any fresh timestamp.
		return nil, errors.New("verify.timestamp_header: the timestamp is not signed: verify.signed_content must contain {timestamp} or {timestamp_ms}")
	}
	if cfg.PublicURL != "" && !slices.ContainsFunc(segs, func(s segment) bool { return s.kind == segURL }) && cfg.Scheme == SchemeHMAC {
		return nil, errors.New("verify.public_url: only used with {url} in verify.signed_content")
	}
	s.macs = newMACs(keys, newHash)
	s.segments = segs
	if cfg.TimestampHeader != "" {
		s.tsHeader = http.CanonicalHeaderKey(cfg.TimestampHeader)
	}
	return s, nil
}

// parseTemplate splits a signed-content template into literal text and
// placeholders: {body} (exactly once), {timestamp} and {timestamp_ms}
// (the signed timestamp as received, only with haveTimestamp), {method},
// {url} and {header:Name}. Any other {name} made of letters and
// underscores is an error, to catch typos; other braces are literal.
func parseTemplate(t string, haveTimestamp bool) ([]segment, error) {
	var segs []segment
	bodies, stamps := 0, 0
	lit := strings.Builder{}
	flush := func() {
		if lit.Len() > 0 {
			segs = append(segs, segment{kind: segLiteral, lit: []byte(lit.String())})
			lit.Reset()
		}
	}
	for i := 0; i < len(t); {
		if t[i] == '{' {
			if end := strings.IndexByte(t[i:], '}'); end > 1 {
				name := t[i+1 : i+end]
				if h, ok := strings.CutPrefix(name, "header:"); ok {
					if !httpguts.ValidHeaderFieldName(h) {
						return nil, fmt.Errorf("{header:%s}: not a valid header name", h)
					}
					flush()
					segs = append(segs, segment{kind: segHeader, lit: []byte(http.CanonicalHeaderKey(h))})
					i += end + 1
					continue
				}
				if isPlaceholderName(name) {
					flush()
					switch name {
					case "body":
						segs = append(segs, segment{kind: segBody})
						bodies++
					case "timestamp", "timestamp_ms":
						if !haveTimestamp {
							return nil, fmt.Errorf("{%s} needs verify.timestamp_header or verify.timestamp_key", name)
						}
						seg := segment{kind: segTimestamp}
						if name == "timestamp_ms" {
							seg.lit = []byte{} // marks milliseconds
						}
						segs = append(segs, seg)
						stamps++
					case "method":
						segs = append(segs, segment{kind: segMethod})
					case "url":
						segs = append(segs, segment{kind: segURL})
					default:
						return nil, fmt.Errorf("unknown placeholder {%s} (want {body}, {timestamp}, {timestamp_ms}, {method}, {url} or {header:Name})", name)
					}
					i += end + 1
					continue
				}
			}
		}
		lit.WriteByte(t[i])
		i++
	}
	flush()
	if bodies != 1 {
		return nil, errors.New("must contain {body} exactly once")
	}
	if stamps > 1 {
		return nil, errors.New("may contain the timestamp once")
	}
	return segs, nil
}

func isPlaceholderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return s != ""
}

// parseGenericSignature strips prefix from v and decodes the rest.
func parseGenericSignature(dst *[sha256.Size]byte, header, prefix string, b64 bool, v string) error {
	sig, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return malformed(header, fmt.Sprintf("want prefix %q", prefix))
	}
	if b64 {
		if !decodeBase64(dst[:], sig) {
			return malformed(header, "want base64 of 32 bytes")
		}
		return nil
	}
	if !decodeHex(dst[:], sig) {
		return malformed(header, "want 64 hex digits")
	}
	return nil
}

func (s *genericScheme) macSize() int {
	if s.size == 0 {
		return sha256.Size
	}
	return s.size
}

// decode decodes one encoded signature into dst (len macSize).
func (s *genericScheme) decode(dst []byte, v string) bool {
	switch {
	case s.base64:
		return decodeBase64(dst, v)
	case s.urlB64:
		return decodeBase64URL(dst, v)
	}
	return decodeHex(dst, v)
}

func (s *genericScheme) encoding() string {
	switch {
	case s.base64:
		return "base64"
	case s.urlB64:
		return "base64url"
	}
	return "hex"
}

// signatures is what one request carries: up to maxSignatures decoded
// signatures and the timestamp.
type signatures struct {
	n    int
	sums [maxSignatures][sha512.Size]byte
	ts   string
}

// read fills sg from r's headers; the error names the header.
func (s *genericScheme) read(r Request, sg *signatures) error {
	size := s.macSize()
	if s.numbered != nil {
		for _, name := range s.numbered {
			v := r.Header.Get(name)
			if v == "" {
				break
			}
			if sg.n < maxSignatures && s.decode(sg.sums[sg.n][:size], v) {
				sg.n++
			}
		}
		if sg.n == 0 {
			if r.Header.Get(s.numbered[0]) == "" {
				return missing(s.numbered[0])
			}
			return malformed(s.numbered[0], fmt.Sprintf("want %s of %d bytes", s.encoding(), size))
		}
		return nil
	}
	if s.sigKey == "" {
		v := r.Header.Get(s.header)
		if v == "" {
			return missing(s.header)
		}
		sig, ok := strings.CutPrefix(v, s.prefix)
		if !ok {
			return malformed(s.header, fmt.Sprintf("want prefix %q", s.prefix))
		}
		if !s.decode(sg.sums[0][:size], sig) {
			return malformed(s.header, fmt.Sprintf("want %s of %d bytes", s.encoding(), size))
		}
		sg.n = 1
	} else {
		values := r.Header.Values(s.header)
		if len(values) == 0 || values[0] == "" {
			return missing(s.header)
		}
		for _, v := range values {
			s.readPairs(v, sg, size)
		}
		if sg.n == 0 {
			return malformed(s.header, fmt.Sprintf("want %s=<%s of %d bytes>", s.sigKey, s.encoding(), size))
		}
		if s.tsKey != "" && sg.ts == "" {
			return malformed(s.header, "want "+s.tsKey+"=<timestamp>")
		}
	}
	if s.tsHeader != "" {
		if sg.ts = r.Header.Get(s.tsHeader); sg.ts == "" {
			return missing(s.tsHeader)
		}
	}
	for _, name := range s.idHeaders {
		if r.Header.Get(name) == "" {
			return missing(name)
		}
	}
	return nil
}

// readPairs reads a list of k=v pairs separated by commas or
// semicolons (spaces around items ignored): every sigKey value that
// decodes is a signature, tsKey's value the timestamp (the last one).
// Values of other keys, and pairs without "=", are ignored, as Stripe's
// and PagerDuty's own parsers do.
func (s *genericScheme) readPairs(v string, sg *signatures, size int) {
	for v != "" {
		i := strings.IndexAny(v, ",;")
		item := v
		if i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			v = ""
		}
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		switch {
		case !ok:
		case k == s.sigKey:
			if sg.n < maxSignatures && s.decode(sg.sums[sg.n][:size], val) {
				sg.n++
			}
		case k == s.tsKey:
			sg.ts = val
		}
	}
}

// timestampHeader names where the timestamp is, for errors.
func (s *genericScheme) timestampHeader() string {
	if s.tsHeader != "" {
		return s.tsHeader
	}
	return s.header
}

func (s *genericScheme) hasTimestamp() bool { return s.tsHeader != "" || s.tsKey != "" }

// checkTime checks ts, in the scheme's format, against the tolerance.
func (s *genericScheme) checkTime(ts string, now time.Time) error {
	header := s.timestampHeader()
	switch s.tsFormat {
	case tsUnixMS:
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ts[0] == '+' || ts[0] == '-' {
			return fmt.Errorf("%s: not a unix timestamp in milliseconds: %w", header, ErrMalformedSignature)
		}
		tolMS := s.tol * 1000
		if n := now.UnixMilli(); ms < n-tolMS || ms > n+tolMS {
			return fmt.Errorf("%s: %w", header, ErrTimestampOutsideTolerance)
		}
		return nil
	case tsRFC3339:
		t, ok := parseRFC3339(ts)
		if !ok {
			return fmt.Errorf("%s: not an RFC 3339 time: %w", header, ErrMalformedSignature)
		}
		if d := now.Sub(t); d > time.Duration(s.tol)*time.Second || d < -time.Duration(s.tol)*time.Second {
			return fmt.Errorf("%s: %w", header, ErrTimestampOutsideTolerance)
		}
		return nil
	}
	return checkTimestamp(header, ts, now, s.tol)
}

// orbTimestampFormat is RFC 3339 without a zone, in UTC, as Orb sends
// X-Orb-Timestamp (orb-go's WebhookHeaderTimestampFormat).
const orbTimestampFormat = "2006-01-02T15:04:05.999999999"

// parseRFC3339 reads v with a zone (RFC 3339) or without (Orb's, UTC),
// choosing the layout first so that a valid time allocates nothing.
func parseRFC3339(v string) (time.Time, bool) {
	layout := orbTimestampFormat
	if i := strings.IndexByte(v, 'T'); i >= 0 && strings.ContainsAny(v[i:], "Zz+-") {
		layout = time.RFC3339Nano
	}
	t, err := time.Parse(layout, v)
	return t, err == nil
}

func (s *genericScheme) Verify(r Request, now time.Time) error {
	var sg signatures
	if err := s.read(r, &sg); err != nil {
		return err
	}
	if s.hasTimestamp() {
		if err := s.checkTime(sg.ts, now); err != nil {
			return err
		}
	}
	size := s.macSize()
	for _, m := range s.macs {
		st := m.get()
		s.write(st, r, sg.ts)
		sum := st.finish()
		ok := false
		for i := range sg.n {
			ok = ok || hmac.Equal(sum, sg.sums[i][:size])
		}
		m.put(st)
		if ok {
			return nil
		}
	}
	if s.numbered != nil {
		return mismatch(s.numbered[0])
	}
	return mismatch(s.header)
}

// signedURL is {url}: the public URL, with the request's query when it
// has one (the sender signs the URL it requested).
func (s *genericScheme) signedURL(st *macState, rawQuery string) {
	st.writeString(s.publicURL)
	if rawQuery != "" && !strings.Contains(s.publicURL, "?") {
		st.writeString("?")
		st.writeString(rawQuery)
	}
}

func (s *genericScheme) write(st *macState, r Request, ts string) {
	for _, seg := range s.segments {
		switch seg.kind {
		case segLiteral:
			st.h.Write(seg.lit)
		case segBody:
			st.h.Write(r.Body)
		case segTimestamp:
			st.writeString(ts)
		case segMethod:
			st.writeString(r.Method)
		case segURL:
			s.signedURL(st, r.RawQuery)
		case segHeader:
			st.writeString(r.Header.Get(string(seg.lit)))
		}
	}
}

// writeSigned writes the signed content as signed_content lays it out.
func (s *genericScheme) writeSigned(w io.Writer, r Request) bool {
	var sg signatures
	_ = s.read(r, &sg)
	for _, seg := range s.segments {
		switch seg.kind {
		case segLiteral:
			_, _ = w.Write(seg.lit)
		case segBody:
			_, _ = w.Write(r.Body)
		case segTimestamp:
			_, _ = io.WriteString(w, sg.ts)
		case segMethod:
			_, _ = io.WriteString(w, r.Method)
		case segURL:
			_, _ = io.WriteString(w, s.publicURL)
			if r.RawQuery != "" && !strings.Contains(s.publicURL, "?") {
				_, _ = io.WriteString(w, "?"+r.RawQuery)
			}
		case segHeader:
			_, _ = io.WriteString(w, r.Header.Get(string(seg.lit)))
		}
	}
	return true
}

// formatTimestamp is now as the scheme's sender writes it.
func (s *genericScheme) formatTimestamp(now time.Time) string {
	switch s.tsFormat {
	case tsUnixMS:
		return strconv.FormatInt(now.UnixMilli(), 10)
	case tsRFC3339:
		return now.UTC().Format(time.RFC3339Nano)
	}
	return strconv.FormatInt(now.Unix(), 10)
}

func (s *genericScheme) encode(sum []byte) string {
	switch {
	case s.base64:
		return base64.StdEncoding.EncodeToString(sum)
	case s.urlB64:
		return base64.RawURLEncoding.EncodeToString(sum)
	}
	return hex.EncodeToString(sum)
}

// sign signs as the sender does: a POST to the public URL, the headers
// named in the template set to the message id (or "1" without one).
func (s *genericScheme) sign(body []byte, now time.Time, msgID string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	h := http.Header{}
	for k, v := range s.signHeaders {
		h[k] = slices.Clone(v)
	}
	for _, name := range s.idHeaders {
		id := msgID
		if id == "" {
			id = "1"
		}
		h.Set(name, id)
	}
	var ts string
	if s.hasTimestamp() {
		ts = s.formatTimestamp(now)
		if s.tsHeader != "" {
			h.Set(s.tsHeader, ts)
		}
	}
	s.write(st, Request{Method: http.MethodPost, Header: h, Body: body}, ts)
	enc := s.encode(st.finish())
	switch {
	case s.numbered != nil:
		h.Set(s.numbered[0], enc)
	case s.sigKey == "":
		h.Set(s.header, s.prefix+enc)
	case s.tsKey != "":
		h.Set(s.header, s.tsKey+"="+ts+","+s.sigKey+"="+enc)
	default:
		h.Set(s.header, s.sigKey+"="+enc)
	}
	return h, "", nil
}
