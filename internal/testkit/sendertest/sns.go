package sendertest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
)

// SNS is Amazon SNS for tests: a test CA, a signing certificate it
// issued, and a local HTTPS server (its own test certificate) that
// serves the signing certificate and answers subscription
// confirmations, with the verify.SNSTrust that points sns at it.
type SNS struct {
	Server *httptest.Server
	// Trust is what a source's verify.Config.SNS gets.
	Trust *verify.SNSTrust
	// CertURL is where the signing certificate is served.
	CertURL string
	// Topic is the topic ARN the test source accepts.
	Topic string

	key, otherKey *rsa.PrivateKey
	// CertFetches counts requests for the certificate.
	CertFetches atomic.Int32
	mu          sync.Mutex
	confirmed   []string
}

// NewSNS starts the certificate server; it stops at test cleanup.
func NewSNS(t testing.TB) *SNS {
	t.Helper()
	s := &SNS{Topic: "arn:aws:sns:us-east-1:123456789012:orders"}
	caKey := rsaKey(t)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhookd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	s.key, s.otherKey = rsaKey(t), rsaKey(t)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sns.us-east-1.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &s.key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/SimpleNotificationService-test.pem":
			s.CertFetches.Add(1)
			_, _ = w.Write(certPEM)
		case r.URL.Query().Get("Action") == "ConfirmSubscription":
			s.mu.Lock()
			s.confirmed = append(s.confirmed, r.URL.Query().Get("Token"))
			s.mu.Unlock()
			_, _ = w.Write([]byte(`<ConfirmSubscriptionResponse/>`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Server.Close)
	host := s.Server.Listener.Addr().String()
	s.CertURL = s.Server.URL + "/SimpleNotificationService-test.pem"
	s.Trust = &verify.SNSTrust{Client: s.Server.Client(), AllowHost: func(h string) bool { return h == host }}
	return s
}

func rsaKey(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Confirmed returns the tokens of the subscriptions confirmed so far.
func (s *SNS) Confirmed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.confirmed...)
}

// Message is an SNS message before signing.
type Message struct {
	Type, MessageID, Token, TopicArn, Subject, Message, Timestamp string
	SubscribeURL, SigningCertURL                                  string
	// Version is the SignatureVersion: "1" (SHA-1) or "2" (SHA-256).
	Version string
	// OtherKey signs with a key the certificate does not hold.
	OtherKey bool
}

// Notification is a Notification of the test topic with id.
func (s *SNS) Notification(id string) Message {
	return Message{Type: "Notification", MessageID: id, TopicArn: s.Topic, Subject: "order",
		Message: `{"order_id":"o1","amount":1000}`, Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Version: "1", SigningCertURL: s.CertURL}
}

// Confirmation is a SubscriptionConfirmation of the test topic.
func (s *SNS) Confirmation(token string) Message {
	return Message{Type: "SubscriptionConfirmation", MessageID: "165545c9-2a5c-472c-8df2-7ff2be2b3b1b", Token: token, TopicArn: s.Topic,
		Message:      "You have chosen to subscribe to the topic " + s.Topic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		SubscribeURL: s.Server.URL + "/?Action=ConfirmSubscription&TopicArn=" + url.QueryEscape(s.Topic) + "&Token=" + url.QueryEscape(token),
		Timestamp:    time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Version: "1", SigningCertURL: s.CertURL}
}

// Body signs m as AWS documents it ("Verifying the signatures of Amazon
// SNS messages"): each present field of the type's list as
// "Name\nvalue\n", in that order, signed with RSA PKCS #1 v1.5 over
// SHA-1 (version 1) or SHA-256 (version 2); and returns the JSON body.
func (s *SNS) Body(t testing.TB, m Message) []byte {
	t.Helper()
	var signed string
	add := func(k, v string) { signed += k + "\n" + v + "\n" }
	add("Message", m.Message)
	add("MessageId", m.MessageID)
	if m.Type == "Notification" {
		if m.Subject != "" {
			add("Subject", m.Subject)
		}
	} else {
		add("SubscribeURL", m.SubscribeURL)
	}
	add("Timestamp", m.Timestamp)
	if m.Type != "Notification" {
		add("Token", m.Token)
	}
	add("TopicArn", m.TopicArn)
	add("Type", m.Type)
	key := s.key
	if m.OtherKey {
		key = s.otherKey
	}
	var sig []byte
	var err error
	if m.Version == "2" {
		d := sha256.Sum256([]byte(signed))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	} else {
		d := sha1.Sum([]byte(signed))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, d[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{
		"Type": m.Type, "MessageId": m.MessageID, "TopicArn": m.TopicArn, "Message": m.Message, "Timestamp": m.Timestamp,
		"SignatureVersion": m.Version, "Signature": base64.StdEncoding.EncodeToString(sig), "SigningCertURL": m.SigningCertURL,
	}
	if m.Subject != "" {
		out["Subject"] = m.Subject
	}
	if m.Type != "Notification" {
		out["Token"], out["SubscribeURL"] = m.Token, m.SubscribeURL
	}
	b, _ := json.Marshal(out)
	return b
}

// Header is what SNS sends with m.
func Header(m Message) http.Header {
	h := http.Header{}
	h.Set("x-amz-sns-message-type", m.Type)
	h.Set("x-amz-sns-message-id", m.MessageID)
	h.Set("x-amz-sns-topic-arn", m.TopicArn)
	h.Set("Content-Type", "text/plain; charset=UTF-8")
	return h
}
