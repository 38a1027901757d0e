package loadgen

import (
	"context"

	"github.com/webhookd/webhookd"
	"github.com/webhookd/webhookd/gateway"
	"github.com/webhookd/webhookd/jobs"
)

// startWebhookd starts webhookd against env as webhookd.Start assembles
// it for every deployment (the gateway when env.Gateway, the worker when
// env.Worker), with the configuration's defaults, and returns its base
// URL and how to stop it.
func startWebhookd(ctx context.Context, env Env) (string, func() error, error) {
	src, err := gateway.NewSource(gateway.SourceSpec{Verify: env.Source.Verify, EventID: env.Source.EventID, Destinations: 1})
	if err != nil {
		return "", nil, err
	}
	p, err := webhookd.Start(ctx, webhookd.Config{
		Listen:      "127.0.0.1:0",
		DatabaseURL: env.DatabaseURL,
		Redis:       webhookd.RedisConfig{URL: env.RedisURL},
		Queue:       env.Queue,
		Roles:       webhookd.Roles{Gateway: env.Gateway, Worker: env.Worker},
		Sources:     map[string]gateway.Source{env.Source.Name: src},
		Routes: jobs.Routes{env.Source.Name: {
			env.Source.Destination: jobs.Destination{Name: env.Source.Destination, URL: env.SinkURL}.WithDefaults(),
		}},
	}, env.Log)
	if err != nil {
		return "", nil, err
	}
	return "http://" + p.Addr().String(), func() error { return p.Stop(context.WithoutCancel(ctx)) }, nil
}
