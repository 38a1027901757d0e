package main

import (
	"net"
	"strings"

	"github.com/webhookd/webhookd/gateway/admin"
)

// newAdmin builds the admin service (replays, listings) on the CLI's
// store and queue, as a process builds it for its HTTP surface.
func newAdmin(a *cli) *admin.Admin {
	return admin.New(a.store, a.store, a.enqueuer, admin.Config{
		Hosts:  listenNames(a.cfg.Listen),
		Routes: a.cfg.routes(),
		Logger: a.log,
	})
}

// listenNames returns the host name of the listen address when it is a
// name (not an address), in lower case: a tokenless admin answers
// requests addressed to it as well as to loopback names.
func listenNames(listen string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return nil
	}
	return []string{strings.ToLower(host)}
}
