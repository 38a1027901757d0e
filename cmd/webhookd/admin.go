package main

import (
	"net"
	"strings"
)

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
