package alerts

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"github.com/webhookd/webhookd/internal/field"
)

// EmailSpec sends messages by email over SMTP.
type EmailSpec struct {
	// SMTPURL is smtp://[user:pass@]host[:port] (STARTTLS when the server
	// offers it; port 587 by default) or smtps://… (TLS from the start;
	// port 465 by default).
	SMTPURL string   `yaml:"smtp_url"`
	From    string   `yaml:"from"`
	To      []string `yaml:"to"`
}

// email sends each message as a plain-text mail.
type email struct {
	addr     string // host:port
	host     string
	implicit bool // smtps: TLS from the start
	auth     smtp.Auth
	// from and to are the header's addresses as configured; envelopeFrom
	// and envelopeTo their bare addresses, for MAIL FROM and RCPT TO.
	from         string
	to           []string
	envelopeFrom string
	envelopeTo   []string
}

func newEmail(s EmailSpec) (*email, error) {
	var errs []error
	e := &email{from: s.From, to: s.To}
	u, err := url.Parse(s.SMTPURL)
	switch {
	case s.SMTPURL == "":
		errs = append(errs, field.Errorf("smtp_url", "is required"))
	case err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "":
		errs = append(errs, field.Errorf("smtp_url", "must be smtp://[user:password@]host[:port] or smtps://…"))
	default:
		e.host, e.implicit = u.Hostname(), u.Scheme == "smtps"
		port := u.Port()
		if port == "" {
			port = "587"
			if e.implicit {
				port = "465"
			}
		}
		e.addr = net.JoinHostPort(e.host, port)
		if u.User != nil {
			pass, _ := u.User.Password()
			e.auth = smtp.PlainAuth("", u.User.Username(), pass, e.host)
		}
	}
	if a, err := mail.ParseAddress(s.From); err != nil {
		errs = append(errs, field.Errorf("from", "must be an email address"))
	} else {
		e.envelopeFrom = a.Address
	}
	if len(s.To) == 0 {
		errs = append(errs, field.Errorf("to", "name at least one address"))
	}
	for i, to := range s.To {
		if a, err := mail.ParseAddress(to); err != nil {
			errs = append(errs, field.Errorf(field.Index("to", i), "must be an email address"))
		} else {
			e.envelopeTo = append(e.envelopeTo, a.Address)
		}
	}
	if len(errs) > 0 {
		return nil, field.Join(errs...)
	}
	return e, nil
}

// Kind implements Channel.
func (e *email) Kind() string { return "email" }

// Send implements Channel: one mail to every recipient, its subject the
// summary, its body the summary and the link.
func (e *email) Send(ctx context.Context, m Message) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return fmt.Errorf("error connecting to the SMTP server: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if e.implicit {
		conn = tls.Client(conn, &tls.Config{ServerName: e.host, MinVersion: tls.VersionTLS12})
	}
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return fmt.Errorf("error greeting the SMTP server: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok && !e.implicit {
		if err := c.StartTLS(&tls.Config{ServerName: e.host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("error starting TLS with the SMTP server: %w", err)
		}
	}
	if e.auth != nil {
		if err := c.Auth(e.auth); err != nil {
			return fmt.Errorf("error signing in to the SMTP server: %w", err)
		}
	}
	if err := c.Mail(e.envelopeFrom); err != nil {
		return fmt.Errorf("error sending MAIL FROM: %w", err)
	}
	for _, to := range e.envelopeTo {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("error sending RCPT TO: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("error sending DATA: %w", err)
	}
	if _, err := w.Write(e.mail(m)); err != nil {
		return fmt.Errorf("error writing the mail: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("error ending the mail: %w", err)
	}
	return c.Quit()
}

// mail is m as an RFC 5322 message.
func (e *email) mail(m Message) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\n", e.from)
	fmt.Fprintf(&b, "To: %s\r\n", strings.Join(e.to, ", "))
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", m.Summary()))
	fmt.Fprintf(&b, "Date: %s\r\n", time.Now().Format(time.RFC1123Z))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	fmt.Fprintf(&b, "%s\r\n\r\nFirst seen: %s\r\nLast seen: %s\r\n\r\n%s\r\n", m.Summary(),
		m.Issue.FirstSeen.UTC().Format(time.RFC3339), m.Issue.LastSeen.UTC().Format(time.RFC3339), m.URL)
	return b.Bytes()
}
