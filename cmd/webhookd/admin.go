package main

import (
	"context"
	"log/slog"
	"net"
	"strings"

	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
)

// newAdmin builds the admin service (replays, listings) on a's store and
// queue; the HTTP surface and the CLI share it.
func newAdmin(a *app, withDashboard bool) *admin.Admin {
	cfg := admin.Config{
		Token:  a.cfg.AdminToken,
		Hosts:  listenNames(a.cfg.Listen),
		Routes: a.cfg.routes(),
		Logger: a.log,
	}
	if withDashboard {
		cfg.Dashboard = admin.NewDashboard(a.redis, !a.cfg.Admin.AllowQueueActions)
	}
	return admin.New(a.store, a.store, a.enqueuer, cfg)
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

// mountAdmin adds the admin API, the event browser and the queue dashboard
// to srv, and keeps the queue size gauge current until ctx ends.
func mountAdmin(ctx context.Context, a *app, srv *gateway.Server) error {
	adm := newAdmin(a, true)
	adm.Mount(srv.Echo())
	if adm.LoopbackOnly() {
		a.log.WarnContext(ctx, "no admin_token configured: the admin API, event browser and dashboard answer only on loopback")
	} else {
		a.log.InfoContext(ctx, "admin API, event browser and dashboard need the admin token", slog.String("path", "/admin/"))
	}
	go a.metrics.WatchQueueSizes(ctx, a.redis, a.cfg.Queue, 0, a.log)
	return nil
}
