package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// genericScheme verifies the configurable hmac-sha256 scheme.
type genericScheme struct {
	macs     []*mac
	tol      int64
	header   string // canonical
	tsHeader string // canonical; "" when unused
	base64   bool
	prefix   string
	segments []segment
}

type segmentKind uint8

const (
	segLiteral segmentKind = iota
	segBody
	segTimestamp
)

type segment struct {
	kind segmentKind
	lit  []byte
}

func newGeneric(cfg Config, keys [][]byte, tol int64) (scheme, error) {
	if !httpguts.ValidHeaderFieldName(cfg.Header) {
		return nil, errors.New("verify.header: not a valid header name")
	}
	if cfg.TimestampHeader != "" && !httpguts.ValidHeaderFieldName(cfg.TimestampHeader) {
		return nil, errors.New("verify.timestamp_header: not a valid header name")
	}
	var b64 bool
	switch cfg.Encoding {
	case "hex":
	case "base64":
		b64 = true
	default:
		return nil, fmt.Errorf("verify.encoding: %q is not hex or base64", cfg.Encoding)
	}
	segs, err := parseTemplate(cfg.SignedContent, cfg.TimestampHeader != "")
	if err != nil {
		return nil, fmt.Errorf("verify.signed_content: %w", err)
	}
	if cfg.TimestampHeader != "" && !slices.ContainsFunc(segs, func(s segment) bool { return s.kind == segTimestamp }) {
		// The header would be checked against the clock but not signed:
		// a replay could carry any fresh timestamp.
		return nil, errors.New("verify.timestamp_header: the timestamp is not signed: verify.signed_content must contain {timestamp}")
	}
	s := &genericScheme{
		macs:     newMACs(keys, sha256New),
		tol:      tol,
		header:   http.CanonicalHeaderKey(cfg.Header),
		base64:   b64,
		prefix:   *cfg.Prefix,
		segments: segs,
	}
	if cfg.TimestampHeader != "" {
		s.tsHeader = http.CanonicalHeaderKey(cfg.TimestampHeader)
	}
	return s, nil
}

// parseTemplate splits a signed-content template into literal text and the
// {body} and {timestamp} placeholders. {body} must appear exactly once;
// any other {name} made of letters and underscores is an error, to catch
// typos; other braces are literal.
func parseTemplate(t string, haveTimestamp bool) ([]segment, error) {
	var segs []segment
	bodies := 0
	lit := strings.Builder{}
	flush := func() {
		if lit.Len() > 0 {
			segs = append(segs, segment{kind: segLiteral, lit: []byte(lit.String())})
			lit.Reset()
		}
	}
	for i := 0; i < len(t); {
		if t[i] == '{' {
			if end := strings.IndexByte(t[i:], '}'); end > 1 && isPlaceholderName(t[i+1:i+end]) {
				switch name := t[i+1 : i+end]; name {
				case "body":
					flush()
					segs = append(segs, segment{kind: segBody})
					bodies++
				case "timestamp":
					if !haveTimestamp {
						return nil, errors.New("{timestamp} needs verify.timestamp_header")
					}
					flush()
					segs = append(segs, segment{kind: segTimestamp})
				default:
					return nil, fmt.Errorf("unknown placeholder {%s} (want {body} or {timestamp})", name)
				}
				i += end + 1
				continue
			}
		}
		lit.WriteByte(t[i])
		i++
	}
	flush()
	if bodies != 1 {
		return nil, errors.New("must contain {body} exactly once")
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

func (s *genericScheme) Verify(r Request, now time.Time) error {
	v := r.Header.Get(s.header)
	if v == "" {
		return missing(s.header)
	}
	var ts string
	if s.tsHeader != "" {
		if ts = r.Header.Get(s.tsHeader); ts == "" {
			return missing(s.tsHeader)
		}
	}
	var got [sha256.Size]byte
	if err := parseGenericSignature(&got, s.header, s.prefix, s.base64, v); err != nil {
		return err
	}
	if s.tsHeader != "" {
		if err := checkTimestamp(s.tsHeader, ts, now, s.tol); err != nil {
			return err
		}
	}
	for _, m := range s.macs {
		st := m.get()
		s.write(st, r.Body, ts)
		ok := hmac.Equal(st.finish(), got[:])
		m.put(st)
		if ok {
			return nil
		}
	}
	return mismatch(s.header)
}

func (s *genericScheme) write(st *macState, body []byte, ts string) {
	for _, seg := range s.segments {
		switch seg.kind {
		case segLiteral:
			st.h.Write(seg.lit)
		case segBody:
			st.h.Write(body)
		case segTimestamp:
			st.writeString(ts)
		}
	}
}

// writeSigned writes the signed content as signed_content lays it out.
func (s *genericScheme) writeSigned(w io.Writer, r Request) bool {
	var ts string
	if s.tsHeader != "" {
		ts = r.Header.Get(s.tsHeader)
	}
	for _, seg := range s.segments {
		switch seg.kind {
		case segLiteral:
			_, _ = w.Write(seg.lit)
		case segBody:
			_, _ = w.Write(r.Body)
		case segTimestamp:
			_, _ = io.WriteString(w, ts)
		}
	}
	return true
}

func (s *genericScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	st := s.macs[0].get()
	defer s.macs[0].put(st)
	var ts string
	h := http.Header{}
	if s.tsHeader != "" {
		ts = strconv.FormatInt(now.Unix(), 10)
		h.Set(s.tsHeader, ts)
	}
	s.write(st, body, ts)
	sum := st.finish()
	enc := hex.EncodeToString(sum)
	if s.base64 {
		enc = base64.StdEncoding.EncodeToString(sum)
	}
	h.Set(s.header, s.prefix+enc)
	return h, "", nil
}
