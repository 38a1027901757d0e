// Package freeport picks loopback TCP ports for the servers tests start.
//
// A port the kernel hands out for ":0" comes from the ephemeral range,
// the same range every outgoing connection takes its local port from: once
// the probe closes it, any client in the machine (a test's HTTP client, a
// pool dialing Postgres) may take it before the server the test starts
// binds it, and that start fails with "address already in use". Ports are
// therefore picked at random below the ephemeral range, where only
// listeners live, and checked free by binding them once.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// below is the lowest port picked; the top is the start of the kernel's
// ephemeral range (ip_local_port_range), 32768 when it cannot be read.
const below = 20000

// Pick returns a loopback TCP port that was free when it was checked.
func Pick() (int, error) {
	top := ephemeralStart()
	var lastErr error
	for range 50 {
		port := below + rand.IntN(top-below)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			lastErr = err
			continue
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port between %d and %d: %w", below, top, lastErr)
}

func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n <= below+1000 {
		return 32768
	}
	return n
}
