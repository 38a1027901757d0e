package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

// adyenField names the checked field in errors (it is in the body).
const adyenField = "additionalData.hmacSignature"

// adyenScheme verifies Adyen's standard webhooks: every
// NotificationRequestItem in notificationItems[] carries
// additionalData.hmacSignature, the base64 HMAC-SHA256, keyed with the
// hex-decoded HMAC key, of pspReference, originalReference,
// merchantAccountCode, merchantReference, amount.value, amount.currency,
// eventCode and success joined with ":" (as Adyen's Go library computes
// it: a missing field is empty, a missing amount.value "0"). One POST is
// one event and every item must verify under a configured key.
type adyenScheme struct {
	macs []*mac
}

func newAdyen(secrets []string) (scheme, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := hex.DecodeString(s)
		if err != nil || len(k) == 0 {
			return nil, fmt.Errorf("verify.secrets[%d]: want the HMAC key as Adyen shows it (hex)", i)
		}
		keys[i] = k
	}
	return &adyenScheme{macs: newMACs(keys, sha256New)}, nil
}

// adyenSigned returns the signed string of one NotificationRequestItem.
func adyenSigned(item gjson.Result) string {
	f := func(path string) string { return item.Get(path).String() }
	return strings.Join([]string{
		f("pspReference"), f("originalReference"), f("merchantAccountCode"), f("merchantReference"),
		strconv.FormatInt(item.Get("amount.value").Int(), 10), f("amount.currency"), f("eventCode"), f("success"),
	}, ":")
}

// adyenItems returns the body's NotificationRequestItems.
func adyenItems(body []byte) ([]gjson.Result, error) {
	if !jsonlimit.Valid(body) {
		return nil, malformed(adyenField, `body is not JSON: want {"notificationItems":[…]}`)
	}
	items := gjson.GetBytes(body, "notificationItems")
	if !items.IsArray() || len(items.Array()) == 0 {
		return nil, malformed(adyenField, `want {"notificationItems":[…]} with at least one item`)
	}
	var out []gjson.Result
	for _, it := range items.Array() {
		out = append(out, it.Get("NotificationRequestItem"))
	}
	return out, nil
}

func (s *adyenScheme) Verify(r Request, _ time.Time) error {
	items, err := adyenItems(r.Body)
	if err != nil {
		return err
	}
	for i, item := range items {
		field := fmt.Sprintf("notificationItems[%d].%s", i, adyenField)
		sig := item.Get("additionalData.hmacSignature")
		if sig.Type != gjson.String || sig.Str == "" {
			if sig.Exists() && sig.Type != gjson.String {
				return malformed(field, "want a string")
			}
			return missing(field)
		}
		var got [sha256.Size]byte
		if !decodeBase64(got[:], sig.Str) {
			return malformed(field, "want base64 of 32 bytes")
		}
		signed := adyenSigned(item)
		if firstSigner(s.macs, nil, func(sum []byte) bool { return hmac.Equal(sum, got[:]) }, signed) < 0 {
			return mismatch(field)
		}
	}
	return nil
}

// writeSigned writes every item's signed string, one a line.
func (s *adyenScheme) writeSigned(w io.Writer, r Request) bool {
	items, err := adyenItems(r.Body)
	if err != nil {
		return false
	}
	for _, item := range items {
		_, _ = io.WriteString(w, adyenSigned(item)+"\n")
	}
	return true
}

// sign adds nothing: Adyen signs inside each item, which must already
// carry its hmacSignature under the first key.
func (s *adyenScheme) sign(body []byte, now time.Time, _ string) (http.Header, string, error) {
	if err := (&adyenScheme{macs: s.macs[:1]}).Verify(Request{Body: body}, now); err != nil {
		return nil, "", fmt.Errorf("adyen signs inside each notification item: %w", err)
	}
	return http.Header{}, "", nil
}

// AdyenSignBody returns body, an Adyen notification, with every item's
// additionalData.hmacSignature set under hexKey as Adyen would send it:
// for webhookd send and tests. Its keys come out sorted.
func AdyenSignBody(body []byte, hexKey string) ([]byte, error) {
	s, err := newAdyen([]string{hexKey})
	if err != nil {
		return nil, err
	}
	m := s.(*adyenScheme).macs[0]
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("adyen body: want a JSON object: %w", err)
	}
	items, _ := doc["notificationItems"].([]any)
	for i, it := range items {
		wrapper, _ := it.(map[string]any)
		item, ok := wrapper["NotificationRequestItem"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("adyen body: notificationItems[%d] has no NotificationRequestItem", i)
		}
		raw, _ := json.Marshal(item)
		st := m.get()
		_, _ = io.WriteString(st.h, adyenSigned(gjson.ParseBytes(raw)))
		sig := base64.StdEncoding.EncodeToString(st.finish())
		m.put(st)
		extra, _ := item["additionalData"].(map[string]any)
		if extra == nil {
			extra = map[string]any{}
		}
		extra["hmacSignature"] = sig
		item["additionalData"] = extra
	}
	return json.Marshal(doc)
}
