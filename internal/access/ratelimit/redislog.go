package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LogRedisTo sends go-redis's own lines (a failed dial, a connection it
// could not close) to log, at warn level, instead of the standard
// library's logger on stderr, whose plain lines break a JSON log. go-redis
// has one logger for the whole process: the process's start sets it, once.
func LogRedisTo(log *slog.Logger) { redis.SetLogger(redisLog{log}) }

type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	l.log.WarnContext(ctx, msg, "component", "go-redis")
}
