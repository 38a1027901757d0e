package jobs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/dedupe"
	"github.com/webhookd/webhookd/internal/testkit/pipelinetest"
	"github.com/webhookd/webhookd/jobs"
)

// writePEM writes blocks of typ to a file in dir and returns its path.
func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testPKI is a CA and a client certificate it issued, as PEM files.
type testPKI struct {
	pool            *x509.CertPool
	cert, key, root string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhookd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, root: writePEM(t, dir, "client-ca.pem", "CERTIFICATE", caDER),
		cert: writePEM(t, dir, "client.pem", "CERTIFICATE", der), key: writePEM(t, dir, "client-key.pem", "PRIVATE KEY", keyDER)}
}

// TestMTLSDestination: a destination that requires a client certificate
// from the test CA gets the call from a destination with tls: cert and
// key; without them its handshake refuses the call, a failed attempt.
// ca: is the server's own CA (httptest's), trusted instead of the
// system's.
func TestMTLSDestination(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	var (
		mu    sync.Mutex
		peers []string
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peers = append(peers, r.TLS.PeerCertificates[0].Subject.CommonName+" "+r.Header.Get("Webhookd-Event-Id"))
		mu.Unlock()
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	serverCA := writePEM(t, t.TempDir(), "server-ca.pem", "CERTIFICATE", srv.Certificate().Raw)

	for _, tc := range []struct {
		name   string
		tls    *jobs.TLSSpec
		status string
	}{
		{"with the client certificate", &jobs.TLSSpec{CA: serverCA, Cert: pki.cert, Key: pki.key}, dedupe.StatusDone},
		{"without it", &jobs.TLSSpec{CA: serverCA}, dedupe.StatusDead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, handlerOptions{dest: jobs.DestinationSpec{URL: srv.URL, MaxAttempts: 1, TLS: tc.tls}})
			q := b.startWorker(t)
			id := strings.ReplaceAll(tc.name, " ", "_")
			b.enqueue(t, q, id)
			pipelinetest.Eventually(t, 10*time.Second, "the run "+tc.status, func() bool { return b.status(t, "src:dst:"+id) == tc.status })
			mu.Lock()
			got := strings.Join(peers, ",")
			mu.Unlock()
			r := b.run(t, "src:dst:"+id)
			if tc.status == dedupe.StatusDone {
				if !strings.Contains(got, "webhookd "+id) {
					t.Errorf("the destination saw %q, want a call from the client certificate", got)
				}
				return
			}
			if strings.Contains(got, id) {
				t.Errorf("the destination served a call without a client certificate: %q", got)
			}
			if r.LastError == nil || !strings.Contains(*r.LastError, "connection error") || r.Attempts != 1 {
				t.Errorf("run %+v, want one failed attempt, a connection error", r)
			}
		})
	}
}

// TestTLSConfigErrors: a tls: file that cannot be read or holds no
// certificate is a configuration error naming the file.
func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		tls  jobs.TLSSpec
		want string
	}{
		{jobs.TLSSpec{CA: missing}, "tls.ca: cannot read " + missing + ": no such file"},
		{jobs.TLSSpec{CA: pki.key}, "tls.ca: " + pki.key + " holds no PEM certificate"},
		{jobs.TLSSpec{Cert: pki.cert, Key: missing}, "tls.cert: cannot load the client certificate " + pki.cert + " with its key " + missing},
		{jobs.TLSSpec{Cert: pki.cert}, "tls.key: give both cert and key"},
		{jobs.TLSSpec{}, "tls: give ca, or cert and key"},
	} {
		_, err := jobs.NewDestination(jobs.DestinationSpec{Name: "d", URL: "https://127.0.0.1:1/", TLS: &tc.tls}, jobs.DestinationOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%+v: %v, want %q", tc.tls, err, tc.want)
		}
	}
	_, err := jobs.NewDestination(jobs.DestinationSpec{Name: "d", URL: "nats://127.0.0.1:4222", Subject: "s", TLS: &jobs.TLSSpec{CA: pki.root}}, jobs.DestinationOptions{})
	if err == nil || !strings.Contains(err.Error(), "tls: applies only to an http(s) destination") {
		t.Errorf("tls on nats: %v", err)
	}
}
