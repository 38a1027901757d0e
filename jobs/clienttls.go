package jobs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/webhookd/webhookd/internal/field"
)

// TLSSpec is an HTTP destination's TLS (tls:): a CA to trust instead of
// the system's, and a client certificate for mTLS. The files are read
// when the configuration is.
type TLSSpec struct {
	// CA is a PEM file of the CA certificates the destination's
	// certificate must chain to.
	CA string `yaml:"ca"`
	// Cert and Key are PEM files of the client certificate and its key;
	// both or neither.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// newTLSClient builds the client of an HTTP destination with tls:, its
// own transport (its own connections) with spec's CA and certificate.
// Its errors are field errors under "tls" naming the file, never its
// content.
func newTLSClient(spec *TLSSpec, allowLinkLocal bool) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if spec.CA != "" {
		pem, err := os.ReadFile(spec.CA)
		if err != nil {
			return nil, field.Errorf("tls.ca", "cannot read %s: %s", spec.CA, describeFileError(err))
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, field.Errorf("tls.ca", "%s holds no PEM certificate", spec.CA)
		}
	}
	switch {
	case spec.Cert != "" && spec.Key != "":
		cert, err := tls.LoadX509KeyPair(spec.Cert, spec.Key)
		if err != nil {
			return nil, field.Errorf("tls.cert", "cannot load the client certificate %s with its key %s: %s", spec.Cert, spec.Key, describeFileError(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	case spec.Cert != "" || spec.Key != "":
		return nil, &field.Error{Path: "tls.key", Err: errors.New("give both cert and key, or neither")}
	case spec.CA == "":
		return nil, &field.Error{Path: "tls", Err: errors.New("give ca, or cert and key")}
	}
	t := NewTransport(allowLinkLocal)
	t.TLSClientConfig = cfg
	return &http.Client{Transport: t, CheckRedirect: noRedirects}, nil
}

// describeFileError says why a file could not be used without its path
// twice (the field error names it) or its content.
func describeFileError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return fmt.Sprint(err)
}
