package main

import "github.com/webhookd/webhookd/gateway"

// mountAdmin adds the admin API, the event browser and the queue dashboard
// to srv.
func mountAdmin(_ *app, _ *gateway.Server) error {
	return nil
}
