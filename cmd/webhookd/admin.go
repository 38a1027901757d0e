package main

import (
	"context"
	"log/slog"

	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/gateway/admin"
)

// newAdmin builds the admin service (replays, listings) on a's store and
// queue; the HTTP surface and the CLI share it.
func newAdmin(a *app, withDashboard bool) *admin.Admin {
	cfg := admin.Config{
		Token:  a.cfg.AdminToken,
		Routes: a.cfg.routes(),
		Logger: a.log,
	}
	if withDashboard {
		cfg.Dashboard = admin.NewDashboard(a.redis, !a.cfg.Admin.AllowQueueActions)
	}
	return admin.New(a.store, a.store, a.enqueuer, cfg)
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
