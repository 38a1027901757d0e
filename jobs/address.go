package jobs

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrLinkLocalDestination is the dial error of a destination address that
// is link-local (169.254.0.0/16, fe80::/10) or a cloud's metadata
// service (fd00:ec2::254): where a cloud answers with the instance's
// credentials. A destination may reach one only with
// allow_link_local_destinations: true.
var ErrLinkLocalDestination = errors.New("destination address is link-local, where a cloud's metadata service answers " +
	"(set allow_link_local_destinations: true to call it)")

// awsMetadataV6 is EC2's IPv6 metadata address (unique local, not
// link-local).
var awsMetadataV6 = netip.MustParseAddr("fd00:ec2::254")

// metadataHosts are the names clouds give their metadata services.
var metadataHosts = []string{"metadata.google.internal", "metadata.goog", "metadata"}

// linkLocal reports whether addr is link-local or a metadata address.
func linkLocal(addr netip.Addr) bool {
	addr = addr.Unmap()
	return addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() || addr == awsMetadataV6
}

// checkDestinationURL refuses, at configuration time, a URL that calls
// webhookd's own listen address (a destination that reaches the admin API
// as the gateway's own loopback peer), or a link-local or metadata host
// unless allowLinkLocal. Names other than the metadata ones are checked
// when dialled (guardDial), since they may resolve anywhere.
func checkDestinationURL(u *url.URL, listen string, allowLinkLocal bool) error {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if lhost, lport, err := net.SplitHostPort(listen); err == nil && lport == port && lport != "0" {
		if isLocalHost(host) && (lhost == "" || isLocalHost(lhost)) || strings.EqualFold(host, lhost) {
			return fmt.Errorf("%s is webhookd's own listen address (%s): a destination must be another service", u.Host, listen)
		}
	}
	if allowLinkLocal {
		return nil
	}
	if addr, err := netip.ParseAddr(host); err == nil && linkLocal(addr) {
		return ErrLinkLocalDestination
	}
	for _, m := range metadataHosts {
		if strings.EqualFold(strings.TrimSuffix(host, "."), m) {
			return ErrLinkLocalDestination
		}
	}
	return nil
}

// isLocalHost reports whether host names this machine: localhost, a
// loopback or an unspecified address.
func isLocalHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && (addr.IsLoopback() || addr.IsUnspecified())
}

// guardDial is a net.Dialer Control func refusing link-local and
// metadata addresses, whatever name resolved to them.
func guardDial(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if addr, err := netip.ParseAddr(host); err == nil && linkLocal(addr) {
		return ErrLinkLocalDestination
	}
	return nil
}

// NewTransport returns the HTTP transport destination calls share:
// pooled connections, and, unless allowLinkLocal, no dial to a
// link-local or metadata address.
func NewTransport(allowLinkLocal bool) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	if !allowLinkLocal {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: guardDial}
		t.DialContext = d.DialContext
	}
	return t
}
