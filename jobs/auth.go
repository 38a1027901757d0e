package jobs

import (
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

// httpAuth is a credential built once: the header each call carries.
type httpAuth struct {
	name, value string
}

// apply sets the credential on a call's request.
func (a *httpAuth) apply(req *http.Request) { req.Header.Set(a.name, a.value) }

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
		a = &httpAuth{"Authorization", "Bearer " + spec.Bearer}
	}
	if b := spec.Basic; b != nil {
		set++
		if b.User == "" {
			return nil, field.Errorf("auth.basic.user", "required")
		}
		a = &httpAuth{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(b.User+":"+b.Password))}
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
		a = &httpAuth{http.CanonicalHeaderKey(h.Name), h.Value}
	}
	switch set {
	case 0:
		return nil, &field.Error{Path: "auth", Err: errors.New("give one of bearer, basic or header")}
	case 1:
		if !httpguts.ValidHeaderFieldValue(a.value) {
			return nil, field.Errorf("auth", "the credential holds a character a header cannot carry")
		}
		return a, nil
	}
	return nil, &field.Error{Path: "auth", Err: errors.New("give only one of bearer, basic or header")}
}
