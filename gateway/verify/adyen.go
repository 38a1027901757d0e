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
	"regexp"
	"slices"
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
//
// The signed string is text, the item JSON: an item whose JSON a receiver
// could read otherwise than as what was signed is refused (adyenSigned),
// so that what verifies is what a destination reads.
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

// adyenStringFields are the signed fields Adyen sends as JSON strings, in
// the signed string's order around amount.
var adyenStringFields = [...]string{"pspReference", "originalReference", "merchantAccountCode", "merchantReference", "eventCode", "success"}

// adyenCanonicalInt matches a JSON integer as Adyen writes amount.value:
// no fraction, no exponent, no leading zero.
var adyenCanonicalInt = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// adyenSigned returns the signed string of one NotificationRequestItem,
// or an error wrapping ErrMalformedSignature naming field when the item
// is not in the canonical form that string stands for: each signed field
// absent or a JSON string (amount.value an integer without fraction or
// exponent, not 1000.99 nor "1000", which Adyen's library would both sign
// as 1000), and each key on the way to one spelled exactly and only once
// (encoding/json matches keys regardless of case and keeps the last of
// repeated ones, gjson reads the first: either would let a receiver read
// another value than the one signed).
func adyenSigned(item gjson.Result, field string) (string, error) {
	if !item.IsObject() {
		return "", malformed(field, "NotificationRequestItem: want an object")
	}
	if err := adyenKeys(item, field, append(adyenStringFields[:], "amount", "additionalData")...); err != nil {
		return "", err
	}
	f := make(map[string]string, len(adyenStringFields))
	for _, name := range adyenStringFields {
		v := item.Get(name)
		if v.Exists() && v.Type != gjson.String {
			return "", malformed(field, name+": want a string")
		}
		f[name] = v.Str
	}
	value, currency := "0", ""
	if amount := item.Get("amount"); amount.Exists() {
		if !amount.IsObject() {
			return "", malformed(field, "amount: want an object")
		}
		if err := adyenKeys(amount, field, "value", "currency"); err != nil {
			return "", err
		}
		if v := amount.Get("value"); v.Exists() {
			if _, err := strconv.ParseInt(v.Raw, 10, 64); v.Type != gjson.Number || err != nil || !adyenCanonicalInt.MatchString(v.Raw) {
				return "", malformed(field, "amount.value: want an integer in minor units (no fraction, exponent or quotes)")
			}
			value = v.Raw
		}
		if c := amount.Get("currency"); c.Exists() {
			if c.Type != gjson.String {
				return "", malformed(field, "amount.currency: want a string")
			}
			currency = c.Str
		}
	}
	if extra := item.Get("additionalData"); extra.Exists() {
		if !extra.IsObject() {
			return "", malformed(field, "additionalData: want an object")
		}
		if err := adyenKeys(extra, field, "hmacSignature"); err != nil {
			return "", err
		}
	}
	return strings.Join([]string{
		f["pspReference"], f["originalReference"], f["merchantAccountCode"], f["merchantReference"],
		value, currency, f["eventCode"], f["success"],
	}, ":"), nil
}

// adyenKeys checks the keys of obj that a JSON decoder could take for one
// of names: each must be written exactly as the name (no other case, no
// escape) and only once. The message names the field, never the key sent.
func adyenKeys(obj gjson.Result, field string, names ...string) error {
	var err error
	seen := make(map[string]bool, len(names))
	obj.ForEach(func(k, _ gjson.Result) bool {
		key := k.String()
		for _, name := range names {
			if !strings.EqualFold(key, name) {
				continue
			}
			switch {
			case k.Raw != `"`+name+`"`:
				err = malformed(field, "a key spelled otherwise than "+name)
			case seen[name]:
				err = malformed(field, name+": key repeated")
			}
			seen[name] = true
		}
		return err == nil
	})
	return err
}

// adyenItems returns the body's NotificationRequestItems, each with its
// field name for errors, once the body's keys up to them are canonical.
func adyenItems(body []byte) (items []gjson.Result, fields []string, err error) {
	if !jsonlimit.Valid(body) {
		return nil, nil, malformed(adyenField, `body is not JSON: want {"notificationItems":[…]}`)
	}
	root := gjson.ParseBytes(body)
	if err := adyenKeys(root, adyenField, "notificationItems"); err != nil {
		return nil, nil, err
	}
	list := root.Get("notificationItems")
	if !list.IsArray() || len(list.Array()) == 0 {
		return nil, nil, malformed(adyenField, `want {"notificationItems":[…]} with at least one item`)
	}
	for i, wrapper := range list.Array() {
		field := fmt.Sprintf("notificationItems[%d].%s", i, adyenField)
		if err := adyenKeys(wrapper, field, "NotificationRequestItem"); err != nil {
			return nil, nil, err
		}
		items, fields = append(items, wrapper.Get("NotificationRequestItem")), append(fields, field)
	}
	return items, fields, nil
}

func (s *adyenScheme) Verify(r Request, _ time.Time) error {
	items, fields, err := adyenItems(r.Body)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		field := fields[i]
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
		signed, err := adyenSigned(item, field)
		if err != nil {
			return err
		}
		if firstSigner(s.macs, nil, func(sum []byte) bool { return hmac.Equal(sum, got[:]) }, signed) < 0 {
			return mismatch(field)
		}
		// Adyen never batches one notification twice: a repeated item
		// would deliver it twice under one event.
		if seen[signed] {
			return malformed(field, "the same signed item twice in one request")
		}
		seen[signed] = true
	}
	return nil
}

// writeSigned writes every item's signed string, one a line, sorted: the
// same items in another order are the same signed content.
func (s *adyenScheme) writeSigned(w io.Writer, r Request) bool {
	items, fields, err := adyenItems(r.Body)
	if err != nil {
		return false
	}
	lines := make([]string, 0, len(items))
	for i, item := range items {
		signed, err := adyenSigned(item, fields[i])
		if err != nil {
			return false
		}
		lines = append(lines, signed)
	}
	slices.Sort(lines)
	for _, l := range lines {
		_, _ = io.WriteString(w, l+"\n")
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
		signed, err := adyenSigned(gjson.ParseBytes(raw), fmt.Sprintf("notificationItems[%d]", i))
		if err != nil {
			return nil, fmt.Errorf("adyen body: %w", err)
		}
		st := m.get()
		_, _ = io.WriteString(st.h, signed)
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
