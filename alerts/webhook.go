package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/webhookd/webhookd/gateway/verify"
	"github.com/webhookd/webhookd/internal/field"
)

// WebhookSpec is an HTTP endpoint that gets each Message as JSON, signed
// as Standard Webhooks.
type WebhookSpec struct {
	URL string `yaml:"url"`
	// SigningSecret is a Standard Webhooks secret (whsec_<base64>).
	SigningSecret string `yaml:"signing_secret"`
}

// webhook posts messages as signed JSON.
type webhook struct {
	url    string
	signer verify.Signer
	client *http.Client
	now    func() time.Time
}

func newWebhook(s WebhookSpec) (*webhook, error) {
	if err := checkHTTPURL("url", s.URL); err != nil {
		return nil, err
	}
	if s.SigningSecret == "" {
		return nil, field.Errorf("signing_secret", "is required: receivers verify the message")
	}
	signer, err := verify.NewSigner(verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{s.SigningSecret}})
	if err != nil {
		return nil, field.Errorf("signing_secret", "must be a Standard Webhooks secret, whsec_ followed by base64")
	}
	return &webhook{url: s.URL, signer: signer, client: &http.Client{}, now: time.Now}, nil
}

// Kind implements Channel.
func (w *webhook) Kind() string { return "webhook" }

// Send implements Channel: m as JSON, signed (webhook-id is m.ID).
func (w *webhook) Send(ctx context.Context, m Message) error {
	m.Issue.Events = nil
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	h, _, err := w.signer.Sign(body, w.now(), m.ID)
	if err != nil {
		return fmt.Errorf("could not sign the message: %w", err)
	}
	return postJSON(ctx, w.client, w.url, body, h)
}
