package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/webhookd/webhookd/gateway/eventid"
	"github.com/webhookd/webhookd/gateway/verify"
)

func sendCommand() *cobra.Command {
	var (
		source, target, id, bodyArg, contentType, signingKey string
		n, concurrency                                       int
	)
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Sign a test event as the source's sender would and send it (-n times, -c at once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := configFrom(cmd)
			if err != nil {
				return err
			}
			var src *sourceConf
			for i := range cfg.Sources {
				if cfg.Sources[i].Name == source || (source == "" && i == 0) {
					src = &cfg.Sources[i]
					break
				}
			}
			if src == nil {
				return fmt.Errorf("no source %q in %s", source, cfg.path)
			}
			if id == "" {
				var b [6]byte
				_, _ = rand.Read(b[:])
				id = "evt_" + hex.EncodeToString(b[:])
			}
			body := []byte(bodyArg)
			if strings.HasPrefix(bodyArg, "@") {
				if body, err = os.ReadFile(bodyArg[1:]); err != nil {
					return err
				}
			}
			if len(body) == 0 {
				body = defaultBody(src.Verify, id)
			}
			if len(body) == 0 {
				body = fmt.Appendf(nil, `{"id":%q,"event_id":%q,"type":"demo.created","created":%d,"data":{"object":{"id":"obj_demo","amount":1000}}}`,
					id, id, time.Now().Unix())
			}
			if target == "" {
				listen := cfg.Listen
				if strings.HasPrefix(listen, ":") {
					listen = "127.0.0.1" + listen
				}
				target = "http://" + listen
			}
			if src.Verify.Scheme == verify.SchemeMailgun && len(src.Verify.Secrets) > 0 {
				// Mailgun signs inside the body.
				var tok [16]byte
				_, _ = rand.Read(tok[:])
				if body, err = verify.MailgunSignBody(body, src.Verify.Secrets[0], hex.EncodeToString(tok[:]), time.Now()); err != nil {
					return err
				}
			}
			if src.Verify.Scheme == verify.SchemeAdyen && len(src.Verify.Secrets) > 0 {
				// Adyen signs inside each notification item.
				if body, err = verify.AdyenSignBody(body, src.Verify.Secrets[0]); err != nil {
					return err
				}
			}
			vcfg := src.verifyConfig()
			vcfg.SigningKey = signingKey
			header, rawQuery, err := verify.Sign(vcfg, body, time.Now(), id)
			if err != nil {
				return fmt.Errorf("error signing: %w", err)
			}
			if name, ok := strings.CutPrefix(src.eventIDSpec(), "header:"); ok && header.Get(name) == "" {
				header.Set(name, id)
			}
			if cmd.Flags().Changed("content-type") || header.Get("Content-Type") == "" {
				// twilio's signer chose form or JSON by the body.
				header.Set("Content-Type", contentType)
			}
			url := strings.TrimRight(target, "/") + "/webhooks/" + src.Name
			if rawQuery != "" {
				url += "?" + rawQuery
			}

			// The id the gateway will see: a body of the operator's own
			// carries its own.
			if x, err := eventid.Parse(src.eventIDSpec()); err == nil {
				if got, err := x.Extract(header, body); err == nil {
					id = got
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "sending event %s to %s, %d time(s), %d at once\n", id, url, n, concurrency)
			var (
				wg   sync.WaitGroup
				mu   sync.Mutex
				sem  = make(chan struct{}, max(concurrency, 1))
				fail error
			)
			for i := 1; i <= n; i++ {
				wg.Add(1)
				sem <- struct{}{}
				go func(i int) {
					defer wg.Done()
					defer func() { <-sem }()
					req, _ := http.NewRequestWithContext(cmd.Context(), http.MethodPost, url, bytes.NewReader(body))
					req.Header = header.Clone()
					resp, err := http.DefaultClient.Do(req)
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						fmt.Fprintf(out, "#%d error: %v\n", i, err)
						fail = err
						return
					}
					defer resp.Body.Close()
					answer, _ := io.ReadAll(resp.Body)
					fmt.Fprintf(out, "#%d %d %s\n", i, resp.StatusCode, bytes.TrimSpace(answer))
					if resp.StatusCode >= 300 && fail == nil {
						fail = fmt.Errorf("the gateway answered %d", resp.StatusCode)
					}
				}(i)
			}
			wg.Wait()
			return fail
		},
	}
	cmd.Flags().StringVarP(&source, "source", "s", "", "source name (default: the config's first source)")
	cmd.Flags().StringVar(&target, "url", "", "gateway base URL (default: from the config's listen)")
	cmd.Flags().StringVar(&signingKey, "signing-key", "", "the sender's private key, for schemes whose secrets are public keys (discord: hex Ed25519 seed)")
	cmd.Flags().StringVar(&id, "id", "", "event id (default: a new random one, the same for all copies)")
	cmd.Flags().StringVar(&bodyArg, "body", "", "body, or @file (default: a small JSON event)")
	cmd.Flags().StringVar(&contentType, "content-type", "application/json", "Content-Type of the body (twilio: form or JSON, by the body)")
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many copies to send")
	cmd.Flags().IntVarP(&concurrency, "concurrency", "c", 1, "how many copies in flight at once")
	return cmd
}

// defaultBody is the test event of the schemes whose sender puts what
// verification checks in the body, nil for the others: msgraph's
// clientState (the first secret), linear's webhookTimestamp and mailgun's
// event and adyen's notification (their signatures are added to every
// body before sending).
func defaultBody(v verifyConf, id string) []byte {
	switch v.Scheme {
	case verify.SchemeMSGraph:
		if len(v.Secrets) == 0 {
			return nil
		}
		return fmt.Appendf(nil, `{"value":[{"subscriptionId":"sub_demo","changeType":"created","resource":"Users/demo/Messages/%s","resourceData":{"id":%q},"clientState":%q,"tenantId":"tenant_demo"}]}`,
			id, id, v.Secrets[0])
	case verify.SchemeLinear:
		return fmt.Appendf(nil, `{"action":"create","type":"Issue","data":{"id":%q,"title":"demo"},"webhookTimestamp":%d}`, id, time.Now().UnixMilli())
	case verify.SchemeMailgun:
		return fmt.Appendf(nil, `{"event-data":{"event":"delivered","id":%q,"recipient":"demo@example.com"}}`, id)
	case verify.SchemeAdyen:
		return fmt.Appendf(nil, `{"live":"false","notificationItems":[{"NotificationRequestItem":{"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"DemoAccount","merchantReference":%q,"pspReference":%q,"success":"true"}}]}`, id, id)
	}
	return senderBody(v.Scheme, id)
}

// senderBody is the test event of the senders of issue 32 whose default
// event id is not where send's generic event has one (or that post a
// form): their own shape, the id in its place.
func senderBody(scheme, id string) []byte {
	switch scheme {
	case verify.SchemeHubSpot:
		return fmt.Appendf(nil, `[{"eventId":%q,"subscriptionId":1,"portalId":62515,"occurredAt":%d,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM"}]`, id, time.Now().UnixMilli())
	case verify.SchemeCoinbase:
		return fmt.Appendf(nil, `{"attempt_number":1,"event":{"id":%q,"type":"charge:confirmed","data":{"code":"DEMO"}},"id":"delivery_demo"}`, id)
	case verify.SchemeTelnyx:
		return fmt.Appendf(nil, `{"data":{"event_type":"message.received","id":%q,"occurred_at":"2024-01-01T00:00:00Z","payload":{"text":"demo"},"record_type":"event"}}`, id)
	case verify.SchemeMailchimp:
		return []byte(url.Values{"mandrill_events": {fmt.Sprintf(`[{"event":"send","_id":%q,"ts":%d}]`, id, time.Now().Unix())}}.Encode())
	case verify.SchemeTrello:
		return fmt.Appendf(nil, `{"action":{"id":%q,"type":"updateCard","data":{"card":{"id":"c1"}}},"model":{"id":"m1"}}`, id)
	case verify.SchemeBigCommerce:
		return fmt.Appendf(nil, `{"created_at":%d,"store_id":"1","producer":"stores/demo","scope":"store/order/created","hash":%q,"data":{"type":"order","id":1}}`, time.Now().Unix(), id)
	case verify.SchemePagerDuty:
		return fmt.Appendf(nil, `{"event":{"id":%q,"event_type":"incident.triggered","resource_type":"incident","occurred_at":"2024-01-01T00:00:00Z","data":{"id":"P1"}}}`, id)
	case verify.SchemeSegment:
		return fmt.Appendf(nil, `{"messageId":%q,"type":"track","event":"Demo","userId":"u1"}`, id)
	}
	return nil
}
