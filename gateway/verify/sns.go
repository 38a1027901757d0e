package verify

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/webhookd/webhookd/internal/jsonlimit"
)

// What sns does with a verified SubscriptionConfirmation
// (Config.SubscriptionConfirmation).
const (
	// SNSConfirm visits the SubscribeURL (default).
	SNSConfirm = "confirm"
	// SNSShow logs the SubscribeURL for an operator to visit.
	SNSShow = "show"
)

// SNSTrust says where sns may fetch signing certificates and confirm
// subscriptions. The zero value, and a nil *SNSTrust, mean production:
// HTTPS only, to sns.<region>.amazonaws.com (or .amazonaws.com.cn).
type SNSTrust struct {
	// Client makes the requests. Defaults to a client with a 5 s
	// timeout.
	Client *http.Client
	// AllowHost reports whether a certificate or subscribe URL's host
	// (with port, if any) may be fetched. Defaults to snsHost.
	AllowHost func(host string) bool
}

// snsHost is the host of every certificate and subscribe URL AWS sends,
// as AWS's own message validators check it.
var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]{3,}\.amazonaws\.com(\.cn)?$`).MatchString

// snsScheme verifies Amazon SNS HTTP(S) deliveries: the body is a JSON
// message signed by AWS with RSA (SignatureVersion 1: SHA-1, 2: SHA-256)
// over its canonical string, under the certificate at SigningCertURL,
// which must be HTTPS on sns.<region>.amazonaws.com and a .pem; the
// secrets are the topic ARNs accepted (anyone can create a topic and
// subscribe this URL to it: the topic is what says the message is
// yours). SNS signs no time worth checking (a retry keeps the original
// Timestamp): a message is a duplicate by its MessageId. Subscription
// and unsubscribe confirmations are handshakes.
type snsScheme struct {
	topics    []string
	confirm   bool
	client    *http.Client
	allowHost func(string) bool
	certs     *certCache
}

var snsTopicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.-]{1,256}$`)

func newSNS(cfg Config) (scheme, error) {
	for i, t := range cfg.Secrets {
		if !snsTopicARN.MatchString(t) {
			return nil, fmt.Errorf("verify.secrets[%d]: want a topic ARN (arn:aws:sns:<region>:<account>:<topic>)", i)
		}
	}
	s := &snsScheme{topics: cfg.Secrets, allowHost: snsHost, certs: &certCache{certs: map[string]*x509.Certificate{}}}
	switch cfg.SubscriptionConfirmation {
	case SNSConfirm:
		s.confirm = true
	case SNSShow:
	default:
		return nil, fmt.Errorf("verify.subscription_confirmation: %q is not confirm or show", cfg.SubscriptionConfirmation)
	}
	s.client = &http.Client{Timeout: 5 * time.Second}
	if t := cfg.SNS; t != nil {
		if t.Client != nil {
			s.client = t.Client
		}
		if t.AllowHost != nil {
			s.allowHost = t.AllowHost
		}
	}
	return s, nil
}

// snsMessage is what SNS posts.
type snsMessage struct {
	Type             string  `json:"Type"`
	MessageID        string  `json:"MessageId"`
	Token            string  `json:"Token"`
	TopicArn         string  `json:"TopicArn"`
	Subject          *string `json:"Subject"`
	Message          string  `json:"Message"`
	Timestamp        string  `json:"Timestamp"`
	SignatureVersion string  `json:"SignatureVersion"`
	Signature        string  `json:"Signature"`
	SigningCertURL   string  `json:"SigningCertURL"`
	SubscribeURL     string  `json:"SubscribeURL"`
}

// Message types.
const (
	snsNotification = "Notification"
	snsSubscribe    = "SubscriptionConfirmation"
	snsUnsubscribe  = "UnsubscribeConfirmation"
)

func parseSNS(body []byte) (snsMessage, error) {
	var m snsMessage
	if !jsonlimit.Valid(body) || json.Unmarshal(body, &m) != nil {
		return m, malformed("Signature", "the body is not an SNS message (JSON)")
	}
	if m.Signature == "" {
		return m, missing("Signature")
	}
	if m.Type == "" || m.MessageID == "" || m.TopicArn == "" || m.Timestamp == "" || m.SigningCertURL == "" {
		return m, malformed("Signature", "want Type, MessageId, TopicArn, Timestamp and SigningCertURL")
	}
	if m.Type != snsNotification && m.Type != snsSubscribe && m.Type != snsUnsubscribe {
		return m, malformed("Type", "not an SNS message type")
	}
	if m.Type != snsNotification && (m.Token == "" || m.SubscribeURL == "") {
		return m, malformed("Signature", "a confirmation needs Token and SubscribeURL")
	}
	return m, nil
}

// stringToSign is SNS's canonical string: "Name\nvalue\n" for each
// signed field the message has, in this order.
func (m snsMessage) stringToSign() string {
	var b strings.Builder
	add := func(k, v string) {
		b.WriteString(k)
		b.WriteByte('\n')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	add("Message", m.Message)
	add("MessageId", m.MessageID)
	if m.Type == snsNotification {
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
	} else {
		add("SubscribeURL", m.SubscribeURL)
	}
	add("Timestamp", m.Timestamp)
	if m.Type != snsNotification {
		add("Token", m.Token)
	}
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	return b.String()
}

// checkURL refuses a URL sns must not fetch.
func (s *snsScheme) checkURL(field, raw string, pemFile bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || !s.allowHost(u.Host) || pemFile && !strings.HasSuffix(u.Path, ".pem") {
		return nil, malformed(field, "not an HTTPS URL of sns.<region>.amazonaws.com")
	}
	return u, nil
}

func (s *snsScheme) Verify(r Request, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.verifyContext(ctx, r, now)
}

func (s *snsScheme) verifyContext(ctx context.Context, r Request, now time.Time) error {
	_, err := s.verified(ctx, r, now)
	return err
}

// verified parses and verifies r's message.
func (s *snsScheme) verified(ctx context.Context, r Request, now time.Time) (snsMessage, error) {
	m, err := parseSNS(r.Body)
	if err != nil {
		return m, err
	}
	if !equalToken(m.TopicArn, s.topics) {
		return m, fmt.Errorf("TopicArn: not a configured topic: %w", ErrSignatureMismatch)
	}
	var h crypto.Hash
	switch m.SignatureVersion {
	case "1":
		h = crypto.SHA1
	case "2":
		h = crypto.SHA256
	default:
		return m, malformed("SignatureVersion", "want 1 or 2")
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil || len(sig) == 0 || len(sig) > 1024 {
		return m, malformed("Signature", "want base64")
	}
	u, err := s.checkURL("SigningCertURL", m.SigningCertURL, true)
	if err != nil {
		return m, err
	}
	cert, err := s.certs.get(ctx, s.client, u.String())
	if err != nil {
		return m, err
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return m, fmt.Errorf("SigningCertURL: the certificate is not valid now: %w", ErrSignatureMismatch)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return m, fmt.Errorf("SigningCertURL: not an RSA certificate: %w", ErrSignatureMismatch)
	}
	var digest []byte
	if h == crypto.SHA1 {
		d := sha1.Sum([]byte(m.stringToSign()))
		digest = d[:]
	} else {
		d := sha256.Sum256([]byte(m.stringToSign()))
		digest = d[:]
	}
	if rsa.VerifyPKCS1v15(pub, h, digest, sig) != nil {
		return m, mismatch("Signature")
	}
	return m, nil
}

// handshake answers confirmations; see handshakeContext.
func (s *snsScheme) handshake(r Request, now time.Time) (Answer, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.handshakeContext(ctx, r, now)
}

// handshakeContext answers a SubscriptionConfirmation or an
// UnsubscribeConfirmation once verified (signature and topic), recording
// nothing: a subscription is confirmed by visiting its SubscribeURL
// (checked like a certificate URL), or shown for an operator to visit.
func (s *snsScheme) handshakeContext(ctx context.Context, r Request, now time.Time) (Answer, bool, error) {
	if r.Method != http.MethodPost {
		return Answer{}, false, nil
	}
	t := r.Header.Get("X-Amz-Sns-Message-Type")
	if t != snsSubscribe && t != snsUnsubscribe {
		if t != "" || !strings.Contains(string(r.Body), "Confirmation") {
			return Answer{}, false, nil
		}
	}
	m, err := s.verified(ctx, r, now)
	if err != nil {
		return Answer{}, false, err
	}
	ok := Answer{Status: http.StatusOK}
	switch {
	case m.Type == snsNotification:
		return Answer{}, false, nil
	case m.Type == snsUnsubscribe:
		return ok, true, nil
	case !s.confirm:
		ok.Note = "visit the SubscribeURL to confirm the subscription: " + m.SubscribeURL
		return ok, true, nil
	}
	u, err := s.checkURL("SubscribeURL", m.SubscribeURL, false)
	if err != nil {
		return Answer{}, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Answer{}, false, malformed("SubscribeURL", "not a URL")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Answer{}, false, fmt.Errorf("SubscribeURL: could not confirm the subscription: %w", ErrKeyUnavailable)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Answer{}, false, fmt.Errorf("SubscribeURL: AWS answered %d: %w", resp.StatusCode, ErrKeyUnavailable)
	}
	ok.Note = "subscription confirmed"
	return ok, true, nil
}

// writeSigned writes the canonical string.
func (s *snsScheme) writeSigned(w io.Writer, r Request) bool {
	m, err := parseSNS(r.Body)
	if err != nil {
		return false
	}
	_, _ = io.WriteString(w, m.stringToSign())
	return true
}

func (s *snsScheme) sign([]byte, time.Time, string) (http.Header, string, error) {
	return nil, "", errors.New("sns messages are signed by AWS with a key only AWS holds: publish to the topic instead (aws sns publish)")
}

// certCache keeps the certificates fetched, by URL: AWS rotates them
// rarely, and one fetch per message would be slow and a lever for load.
type certCache struct {
	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// maxCachedCerts bounds the cache; past it, it starts over.
const maxCachedCerts = 64

func (c *certCache) get(ctx context.Context, client *http.Client, u string) (*x509.Certificate, error) {
	c.mu.Lock()
	cert, ok := c.certs[u]
	c.mu.Unlock()
	if ok {
		return cert, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, malformed("SigningCertURL", "not a URL")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("SigningCertURL: could not fetch the certificate: %w", ErrKeyUnavailable)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("SigningCertURL: fetching the certificate answered %d: %w", resp.StatusCode, ErrKeyUnavailable)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("SigningCertURL: could not read the certificate: %w", ErrKeyUnavailable)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("SigningCertURL: not a PEM certificate: %w", ErrSignatureMismatch)
	}
	cert, err = x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("SigningCertURL: not a certificate: %w", ErrSignatureMismatch)
	}
	c.mu.Lock()
	if len(c.certs) >= maxCachedCerts {
		clear(c.certs)
	}
	c.certs[u] = cert
	c.mu.Unlock()
	return cert, nil
}
