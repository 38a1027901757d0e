package loadgen

import (
	"cmp"
	"context"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/internal/tracing"
	"github.com/webhookd/webhookd/jobs"
	"github.com/webhookd/webhookd/migrations"
)

// startWebhookd starts webhookd against env as webhookd.Start assembles
// it for every deployment (the gateway when env.Gateway, the worker when
// env.Worker), with the configuration's defaults, and returns its base
// URL and how to stop it. With neither role it only applies the
// migrations and returns no URL. Tracing is on when the OTEL_* environment
// says so, as for `webhookd serve`, so its cost can be measured.
func startWebhookd(ctx context.Context, env Env) (string, func() error, error) {
	if !env.Gateway && !env.Worker {
		// The naive ingest without a worker: webhookd runs nothing, but
		// the naive path writes the same schema.
		if _, err := migrations.Up(ctx, env.DatabaseURL); err != nil {
			return "", nil, err
		}
		return "", func() error { return nil }, nil
	}
	sources, err := env.sources()
	if err != nil {
		return "", nil, err
	}
	tp, err := tracing.FromEnv(ctx)
	if err != nil {
		return "", nil, err
	}
	p, err := webhookd.Start(ctx, webhookd.Config{
		TracerProvider: tp, // nil (off) when FromEnv returns none
		Listen:         cmp.Or(env.Listen, "127.0.0.1:0"),
		DatabaseURL:    env.DatabaseURL,
		Redis:          webhookd.RedisConfig{URL: env.RedisURL},
		Queue:          env.Queue,
		Roles:          webhookd.Roles{Gateway: env.Gateway, Worker: env.Worker},
		Sources:        sources,
	}, env.Log)
	if err != nil {
		return "", nil, err
	}
	stop := func() error {
		err := p.Stop(context.WithoutCancel(ctx))
		if tp != nil {
			_ = tp.Shutdown(context.WithoutCancel(ctx))
		}
		return err
	}
	return "http://" + p.Addr().String(), stop, nil
}

// sources builds the run's one source and its destination as the
// configuration builds a deployment's (webhookd.NewSources).
func (env Env) sources() (*webhookd.Sources, error) {
	return webhookd.NewSources([]webhookd.SourceSpec{{
		Name:       env.Source.Name,
		SourceSpec: gateway.SourceSpec{Verify: env.Source.Verify, EventID: env.Source.EventID},
		Destinations: []jobs.DestinationSpec{{Name: env.Source.Destination, URL: env.SinkURL,
			When: env.Rules.When, Transform: env.Rules.Transform}},
	}}, webhookd.SourcesOptions{})
}
