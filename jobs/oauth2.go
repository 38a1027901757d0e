package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/webhookd/webhookd/internal/field"
)

// OAuth2Spec is an HTTP destination's OAuth2 client credentials
// (auth.oauth2): a token is fetched from TokenURL and sent as a bearer
// token.
type OAuth2Spec struct {
	// TokenURL is the authorization server's token endpoint.
	TokenURL string `yaml:"token_url"`
	// ClientID and ClientSecret are the client's credentials.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// Scopes are asked for with each token.
	Scopes []string `yaml:"scopes"`
}

// maxTokenMargin is how long before its expiry a token is fetched anew:
// a call never goes out with a token about to expire on the way. A token
// that lives less than four times as long is renewed after three
// quarters of its life.
const maxTokenMargin = 30 * time.Second

// oauth2Token is a destination's OAuth2 token, fetched by client
// credentials and shared by every call of the process to that
// destination: one fetch at a time, cached until shortly before it
// expires, and fetched anew when the destination refuses it (401).
type oauth2Token struct {
	config clientcredentials.Config
	now    func() time.Time

	mu    sync.Mutex
	token string
	renew time.Time // zero: keep until the destination refuses it
}

// newOAuth2Token checks spec; its errors are field errors under
// auth.oauth2 that never quote a credential.
func newOAuth2Token(spec *OAuth2Spec) (*oauth2Token, error) {
	u, err := url.Parse(spec.TokenURL)
	switch {
	case spec.TokenURL == "":
		return nil, field.Errorf("auth.oauth2.token_url", "required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, field.Errorf("auth.oauth2.token_url", "must be an absolute http(s) URL")
	case spec.ClientID == "":
		return nil, field.Errorf("auth.oauth2.client_id", "required")
	case spec.ClientSecret == "":
		return nil, field.Errorf("auth.oauth2.client_secret", "required")
	}
	return &oauth2Token{now: time.Now, config: clientcredentials.Config{
		ClientID: spec.ClientID, ClientSecret: spec.ClientSecret, TokenURL: spec.TokenURL, Scopes: spec.Scopes,
	}}, nil
}

// get returns the cached token, fetching one when there is none, it is
// about to expire, or it is refused: the token a call was refused with.
// Calls that ask together wait for one fetch; a refused token that
// another call already replaced is not fetched again.
func (o *oauth2Token) get(ctx context.Context, client *http.Client, refused string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.token != "" && o.token != refused && (o.renew.IsZero() || o.now().Before(o.renew)) {
		return o.token, nil
	}
	fetched := o.now()
	tok, err := o.config.Token(context.WithValue(ctx, oauth2.HTTPClient, client))
	if err != nil {
		return "", o.describe(err)
	}
	o.token, o.renew = tok.AccessToken, time.Time{}
	if !tok.Expiry.IsZero() {
		life := tok.Expiry.Sub(fetched)
		o.renew = tok.Expiry.Add(-min(maxTokenMargin, life/4))
	}
	return o.token, nil
}

// describe says why a token could not be fetched without quoting the
// token endpoint's answer (it may echo a credential) or the token URL's
// query.
func (o *oauth2Token) describe(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("oauth2 token endpoint %s answered", redactURL(o.config.TokenURL))
		if re.Response != nil {
			msg += fmt.Sprintf(" HTTP %d", re.Response.StatusCode)
		}
		if re.ErrorCode != "" && len(re.ErrorCode) <= 64 {
			msg += fmt.Sprintf(" %q", re.ErrorCode)
		}
		return errors.New(msg)
	}
	return fmt.Errorf("oauth2 token: %s", describeCallError(err, o.config.TokenURL))
}
