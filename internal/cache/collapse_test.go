package cache

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// waitFollowers blocks until n requests wait on key's flight. It polls the
// flight table (synchronisation, not a timing assertion).
func waitFollowers(t *testing.T, c *Cache, key string, n int) {
	t.Helper()
	got := 0
	if !testutil.Eventually(10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		got = 0
		if f := c.flights[key]; f != nil {
			got = f.waiters
		}
		return got >= n
	}) {
		t.Fatalf("%d followers on %q, want %d", got, key, n)
	}
}

func (e *env) key(path string) string {
	return "r\x00http://" + e.front.Listener.Addr().String() + path
}

// TestCollapsedMisses: 20 concurrent misses of one key make one origin
// request; the 19 followers are answered from what the leader stored.
func TestCollapsedMisses(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		respond(200, "shared", "Cache-Control", "max-age=60")(w, r)
	})
	const n = 20
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- e.get("/c")
		}()
	}
	waitFollowers(t, e.cache, e.key("/c"), n-1)
	close(release)
	wg.Wait()
	close(answers)

	if hits := e.origin.hits.Load(); hits != 1 {
		t.Errorf("origin hits = %d, want 1", hits)
	}
	collapsed := 0
	for a := range answers {
		a.want(t, 200, "shared", StatusMiss)
		if a.res.Collapsed {
			collapsed++
			a.wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200; ttl=60; collapsed")
		}
	}
	if collapsed != n-1 {
		t.Errorf("collapsed answers = %d, want %d", collapsed, n-1)
	}
	if s := e.cache.RouteStats("r"); s.Collapsed != n-1 || s.OriginRequests != 1 || s.Misses != n {
		t.Errorf("stats %+v", s)
	}
}

// TestCollapsedUncacheable: when the leader's response cannot be shared,
// followers are released at once and each asks the origin itself.
func TestCollapsedUncacheable(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	count := 0
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		count++
		i := count
		mu.Unlock()
		if i == 1 {
			<-release
		}
		respond(200, fmt.Sprint("private-", i), "Cache-Control", "private")(w, r)
	})
	const n = 5
	var wg sync.WaitGroup
	answers := make(chan answer, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- e.get("/u")
		}()
	}
	waitFollowers(t, e.cache, e.key("/u"), n-1)
	close(release)
	wg.Wait()
	close(answers)
	seen := map[string]bool{}
	for a := range answers {
		if a.status != 200 || seen[a.body] {
			t.Errorf("answer %d %q (duplicate or failed)", a.status, a.body)
		}
		seen[a.body] = true
	}
	if hits := e.origin.hits.Load(); hits != n {
		t.Errorf("origin hits = %d, want %d", hits, n)
	}
}

// TestCollapsedFollowerCancel: a follower whose client leaves stops
// waiting; nothing is charged to the origin.
func TestCollapsedFollowerCancel(t *testing.T) {
	c := New(Options{})
	defer c.Close()
	f, leader := c.join("k")
	if !leader {
		t.Fatal("not leader")
	}
	req, _ := http.NewRequest(http.MethodGet, "http://h/", nil)
	ctx, cancel := contextWithCancel(req)
	cancel()
	resp, res, ok := c.follow(req.WithContext(ctx), &Policy{}, c.route(""), f, &miss{})
	if !ok || resp != nil || res.Answered() || res.OriginError {
		t.Errorf("follow after cancel: %v %+v %v", resp != nil, res, ok)
	}
	c.finish("k", f, flightResult{})
}
