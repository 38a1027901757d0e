package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/alerts"
)

// alertWebhookSecret signs the webhook channel's messages in the tests.
const alertWebhookSecret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// alertSinks are an alert test's receivers: a Slack-style server, a
// Standard Webhooks receiver that verifies every message, and a real
// SMTP server (go-smtp), each recording what it got.
type alertSinks struct {
	slackURL, webhookURL, smtpAddr string

	mu       sync.Mutex
	slack    []string         // texts
	webhooks []alerts.Message // verified messages
	badSigs  int
	mails    []mail
}

// mail is one mail the SMTP server took.
type mail struct {
	from string
	to   []string
	data string
}

func newAlertSinks(t *testing.T) *alertSinks {
	t.Helper()
	s := &alertSinks{}
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Text string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m.Text == "" {
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.slack = append(s.slack, m.Text)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(slack.Close)
	wh, err := standardwebhooks.NewWebhook(alertWebhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			s.badSigs++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var m alerts.Message
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		s.webhooks = append(s.webhooks, m)
	}))
	t.Cleanup(hook.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{sinks: s}, nil }))
	srv.Domain = "localhost"
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.slackURL, s.webhookURL, s.smtpAddr = slack.URL, hook.URL, l.Addr().String()
	return s
}

// channels returns the three channels pointed at the sinks, built as the
// configuration builds them.
func (s *alertSinks) channels(t *testing.T) []alerts.Channel {
	t.Helper()
	chs, err := alerts.NewChannels(alerts.Spec{Channels: []alerts.ChannelSpec{
		{Slack: &alerts.SlackSpec{WebhookURL: s.slackURL}},
		{Webhook: &alerts.WebhookSpec{URL: s.webhookURL, SigningSecret: alertWebhookSecret}},
		{Email: &alerts.EmailSpec{SMTPURL: "smtp://" + s.smtpAddr, From: "webhookd <webhookd@example.com>", To: []string{"On call <oncall@example.com>"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return chs
}

// counts returns how many messages each receiver got.
func (s *alertSinks) counts() (slack, webhooks, mails int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.slack), len(s.webhooks), len(s.mails)
}

// smtpSession records one SMTP session's mail.
type smtpSession struct {
	sinks *alertSinks
	m     mail
}

func (ss *smtpSession) Reset()        { ss.m = mail{} }
func (ss *smtpSession) Logout() error { return nil }
func (ss *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	ss.m.from = from
	return nil
}
func (ss *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.m.to = append(ss.m.to, to)
	return nil
}
func (ss *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(ss.m.to) == 0 {
		return errors.New("no recipient")
	}
	ss.m.data = string(b)
	ss.sinks.mu.Lock()
	ss.sinks.mails = append(ss.sinks.mails, ss.m)
	ss.sinks.mu.Unlock()
	return nil
}
