package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// SlackSpec is a Slack incoming webhook.
type SlackSpec struct {
	// WebhookURL is the incoming webhook's URL (its path is the
	// credential: keep it in an environment variable).
	WebhookURL string `yaml:"webhook_url"`
}

// slack posts a message to a Slack incoming webhook.
type slack struct {
	url    string
	client *http.Client
}

func newSlack(s SlackSpec) (*slack, error) {
	if err := checkHTTPURL("webhook_url", s.WebhookURL); err != nil {
		return nil, err
	}
	return &slack{url: s.WebhookURL, client: &http.Client{}}, nil
}

// Kind implements Channel.
func (s *slack) Kind() string { return "slack" }

// Send implements Channel: Slack's {"text": …} with a link to the issue.
func (s *slack) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(map[string]string{"text": fmt.Sprintf("%s <%s|view issue>", m.Summary(), m.URL)})
	if err != nil {
		return err
	}
	return postJSON(ctx, s.client, s.url, body, nil)
}

// postJSON posts body and treats any answer but a 2xx as a failure.
func postJSON(ctx context.Context, client *http.Client, url string, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return callError(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "webhookd")
	resp, err := client.Do(req)
	if err != nil {
		return callError(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered HTTP %d", resp.StatusCode)
	}
	return nil
}
