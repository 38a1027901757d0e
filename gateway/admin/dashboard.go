package admin

import (
	"net/http"

	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"
)

// DashboardPath is where the Asynq dashboard is mounted.
const DashboardPath = "/admin/queues"

// sharedRedis hands asynqmon an existing client instead of letting it
// open its own pool. The handler's Close would close that client, so the
// dashboard is never closed: the process closes the client at shutdown.
type sharedRedis struct{ c redis.UniversalClient }

// MakeRedisClient implements asynq.RedisConnOpt.
func (s sharedRedis) MakeRedisClient() any { return s.c }

// NewDashboard returns the Asynq dashboard (asynqmon) for the queues in
// rdb's Redis database, rooted at DashboardPath. With readOnly, its API
// refuses every request that would change a queue or task.
func NewDashboard(rdb redis.UniversalClient, readOnly bool) http.Handler {
	return asynqmon.New(asynqmon.Options{
		RootPath:     DashboardPath,
		RedisConnOpt: sharedRedis{rdb},
		ReadOnly:     readOnly,
	})
}
