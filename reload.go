package webhookd

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/gateway/admin"
	"github.com/webhookd/webhookd/jobs"
)

// newReloadMetrics registers webhookd_config_reloads_total, by result
// ("ok", "invalid"), both at zero.
func newReloadMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhookd_config_reloads_total",
		Help: "Configuration reloads (SIGHUP, POST /admin/reload) by result: ok, or invalid (nothing changed).",
	}, []string{"result"})
	reg.MustRegister(c)
	c.WithLabelValues("ok")
	c.WithLabelValues("invalid")
	return c
}

// Reload reads the configuration again (Config.Load) and, when it is
// valid, puts its sources and destinations (filters, rules, every
// destination key) in force for every part of the process at once: a
// request or call that already loaded the old ones finishes with them.
// An invalid file changes nothing and its problems are returned, wrapping
// admin.ErrConfigInvalid. Keys a running process cannot change are
// named in the result and keep their old values. Reloads run one at a
// time.
func (p *Process) Reload(ctx context.Context) (admin.ReloadResult, error) {
	p.reloading.Lock()
	defer p.reloading.Unlock()
	if p.cfg.Load == nil {
		return admin.ReloadResult{}, admin.ErrReloadUnavailable
	}
	next, err := p.cfg.Load(ctx)
	if err == nil {
		next = next.WithDefaults()
	}
	if err != nil {
		p.reloads.WithLabelValues("invalid").Inc()
		p.log.ErrorContext(ctx, "configuration not reloaded: the file has problems; nothing changed", slog.String("error", err.Error()))
		return admin.ReloadResult{}, fmt.Errorf("%w:\n%w", admin.ErrConfigInvalid, err)
	}
	res := diffSources(p.cfg.Sources, next.Sources)
	res.NeedRestart = needRestart(p.cfg, next)
	for _, s := range res.Added {
		if src, ok := next.Sources.Gateway[s]; ok && src.Scheme == "none" && p.cfg.Roles.Gateway {
			p.log.WarnContext(ctx, "SOURCE ACCEPTS UNSIGNED WEBHOOKS: anyone who can reach it can inject events", slog.String("source", s))
		}
	}
	p.metrics.RegisterDestinations(next.Sources.Routes)
	oldSpecs, nextSpecs := destinationSpecs(p.cfg.Sources), destinationSpecs(next.Sources)
	var oldRoutes jobs.Routes
	if p.cfg.Sources != nil {
		oldRoutes = p.cfg.Sources.Routes
	}
	retired := next.Sources.Routes.Handover(oldRoutes, func(source, destination string) bool {
		o, ok := oldSpecs[source+"/"+destination]
		return ok && reflect.DeepEqual(o, nextSpecs[source+"/"+destination])
	})
	p.routes.Store(next.Sources.Routes)
	// Removed and changed destinations' broker connections close once
	// the calls that loaded them have ended.
	retired.Retire(p.cfg.Lease)
	p.srv.SetSources(next.Sources.Gateway)
	p.cfg.Sources = next.Sources
	p.reloads.WithLabelValues("ok").Inc()
	p.log.InfoContext(ctx, "configuration reloaded",
		slog.Int("sources", res.Sources), slog.Int("destinations", res.Destinations),
		slog.Any("added", res.Added), slog.Any("removed", res.Removed), slog.Any("changed", res.Changed))
	if len(res.NeedRestart) > 0 {
		p.log.WarnContext(ctx, "configuration keys changed that need a restart; they keep their old values until then",
			slog.Any("keys", res.NeedRestart))
	}
	return res, nil
}

// diffSources names the sources and destinations ("source/destination")
// next adds, removes or changes against old.
func diffSources(old, next *Sources) admin.ReloadResult {
	var res admin.ReloadResult
	oldSpecs, nextSpecs := specsByName(old), specsByName(next)
	for _, name := range slices.Sorted(maps.Keys(nextSpecs)) {
		ns := nextSpecs[name]
		res.Sources++
		res.Destinations += len(ns.Destinations)
		prev, ok := oldSpecs[name]
		if !ok {
			res.Added = append(res.Added, name)
			continue
		}
		if !reflect.DeepEqual(prev.SourceSpec, ns.SourceSpec) {
			res.Changed = append(res.Changed, name)
		}
		oldDests := destinationsByName(prev)
		for _, d := range ns.Destinations {
			od, ok := oldDests[d.Name]
			switch {
			case !ok:
				res.Added = append(res.Added, name+"/"+d.Name)
			case !reflect.DeepEqual(od, d):
				res.Changed = append(res.Changed, name+"/"+d.Name)
			}
			delete(oldDests, d.Name)
		}
		for _, d := range slices.Sorted(maps.Keys(oldDests)) {
			res.Removed = append(res.Removed, name+"/"+d)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(oldSpecs)) {
		if _, ok := nextSpecs[name]; !ok {
			res.Removed = append(res.Removed, name)
		}
	}
	return res
}

// destinationSpecs are s's destinations' specs by "source/destination".
func destinationSpecs(s *Sources) map[string]jobs.DestinationSpec {
	out := map[string]jobs.DestinationSpec{}
	if s != nil {
		for _, spec := range s.Specs {
			for _, d := range spec.Destinations {
				out[spec.Name+"/"+d.Name] = d
			}
		}
	}
	return out
}

func specsByName(s *Sources) map[string]SourceSpec {
	out := map[string]SourceSpec{}
	if s != nil {
		for _, spec := range s.Specs {
			out[spec.Name] = spec
		}
	}
	return out
}

func destinationsByName(s SourceSpec) map[string]jobs.DestinationSpec {
	out := map[string]jobs.DestinationSpec{}
	for _, d := range s.Destinations {
		out[d.Name] = d
	}
	return out
}

// needRestart names the keys of next that differ from the running
// configuration but are read only at start: the address served, the
// stores, the queue's layout, the admin API's tokens and the worker's
// tuning.
func needRestart(running, next Config) []string {
	var out []string
	for _, k := range []struct {
		key       string
		old, next any
	}{
		{"listen", running.Listen, next.Listen},
		{"database_url", running.DatabaseURL, next.DatabaseURL},
		{"redis", running.Redis, next.Redis},
		{"queue", running.Queue, next.Queue},
		{"queue_shards", running.QueueShards, next.QueueShards},
		{"lease", running.Lease, next.Lease},
		{"retention", running.Retention, next.Retention},
		{"max_body_bytes", running.MaxBodyBytes, next.MaxBodyBytes},
		{"allow_link_local_destinations", running.AllowLinkLocalDestinations, next.AllowLinkLocalDestinations},
		{"admin", running.Admin, next.Admin},
		{"rejected", running.Rejected, next.Rejected},
		{"worker", running.Worker, next.Worker},
		{"recovery", running.Recovery, next.Recovery},
		{"maintenance", running.Maintenance, next.Maintenance},
	} {
		if !reflect.DeepEqual(k.old, k.next) {
			out = append(out, k.key)
		}
	}
	return out
}
