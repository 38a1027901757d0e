package jobs

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"

	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/internal/field"
)

// AuthSpec is an HTTP destination's credentials (auth:), one of them.
// Values come from the environment (${VAR}); none is ever logged, shown
// or stored with a call.
type AuthSpec struct {
	// Bearer is sent as Authorization: Bearer <token>.
	Bearer string `yaml:"bearer"`
	// Basic is sent as Authorization: Basic.
	Basic *BasicAuthSpec `yaml:"basic"`
	// Header is any one header (an API key).
	Header *HeaderAuthSpec `yaml:"header"`
	// OAuth2 fetches a bearer token by client credentials.
	OAuth2 *OAuth2Spec `yaml:"oauth2"`
}

// BasicAuthSpec is a user and password.
type BasicAuthSpec struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
}

// HeaderAuthSpec is one header carrying a credential.
type HeaderAuthSpec struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

// httpAuth is a credential built once: the header each call carries, or
// an OAuth2 token shared by the calls.
type httpAuth struct {
	name, value string
	oauth2      *oauth2Token
}

// apply sets the credential on a call's request. With OAuth2 it returns
// the token sent, and refused is the token the destination refused (401)
// on the call's first try: another is fetched.
func (a *httpAuth) apply(ctx context.Context, client *http.Client, req *http.Request, refused string) (string, error) {
	if a.oauth2 == nil {
		req.Header.Set(a.name, a.value)
		return "", nil
	}
	tok, err := a.oauth2.get(ctx, client, refused)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return tok, nil
}

// refetches says whether a 401 is answered by fetching a new token and
// trying the call once more.
func (a *httpAuth) refetches() bool { return a != nil && a.oauth2 != nil }

// newHTTPAuth checks spec and builds its header; errors are field errors
// under "auth" that never quote a value.
func newHTTPAuth(spec *AuthSpec) (*httpAuth, error) {
	if spec == nil {
		return nil, nil
	}
	set := 0
	var a *httpAuth
	if spec.Bearer != "" {
		set++
		a = &httpAuth{name: "Authorization", value: "Bearer " + spec.Bearer}
	}
	if b := spec.Basic; b != nil {
		set++
		if b.User == "" {
			return nil, field.Errorf("auth.basic.user", "required")
		}
		a = &httpAuth{name: "Authorization", value: "Basic " + base64.StdEncoding.EncodeToString([]byte(b.User+":"+b.Password))}
	}
	if h := spec.Header; h != nil {
		set++
		switch {
		case !httpguts.ValidHeaderFieldName(h.Name):
			return nil, field.Errorf("auth.header.name", "%q is not a header name", h.Name)
		case ReservedHeader(h.Name):
			return nil, field.Errorf("auth.header.name", "%s is set by webhookd itself", h.Name)
		case h.Value == "":
			return nil, field.Errorf("auth.header.value", "required")
		}
		a = &httpAuth{name: http.CanonicalHeaderKey(h.Name), value: h.Value}
	}
	if o := spec.OAuth2; o != nil {
		set++
		tok, err := newOAuth2Token(o)
		if err != nil {
			return nil, err
		}
		a = &httpAuth{oauth2: tok}
	}
	switch set {
	case 0:
		return nil, &field.Error{Path: "auth", Err: errors.New("give one of bearer, basic, header or oauth2")}
	case 1:
		if a.oauth2 == nil && !httpguts.ValidHeaderFieldValue(a.value) {
			return nil, field.Errorf("auth", "the credential holds a character a header cannot carry")
		}
		return a, nil
	}
	return nil, &field.Error{Path: "auth", Err: errors.New("give only one of bearer, basic, header or oauth2")}
}
