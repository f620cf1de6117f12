package h1client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// Cut ends the requests waiting on a host for their response head, with
// ErrCut, and leaves the other connections be; the cut connections are
// never reused.
func TestCutEndsTheWaitOnAHost(t *testing.T) {
	s, arrived, release := newHoldServer(t)
	defer close(release)
	c := New(Options{MaxIdlePerHost: 4})
	do(t, c, "GET", s.url("/")) // one idle connection, not waiting
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/hold"), nil))
			errs <- err
		})
	}
	for range 3 {
		after(t, "a held request", arrived)
	}
	addr := strings.TrimPrefix(s.url(""), "http://")
	if n := c.Cut(addr); n != 3 {
		t.Fatalf("cut %d requests, want the 3 waiting", n)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var ue *Error
		if !errors.Is(err, ErrCut) || !errors.As(err, &ue) || ue.Phase != PhaseHeader {
			t.Fatalf("error %v, want ErrCut while reading the response head", err)
		}
	}
	if n := idleCount(c, s.url("/")); n != 0 {
		t.Fatalf("%d idle connections after the cut", n)
	}
	before := s.accepted.Load()
	do(t, c, "GET", s.url("/"))
	if s.accepted.Load() != before+1 {
		t.Fatal("a cut connection was reused")
	}
	if c.Cut(addr) != 0 {
		t.Fatal("cut a request that was not waiting")
	}
}

// Forget closes the idle connections to an address and keeps none that
// were in use when they come back.
func TestForgetStopsReusingAnAddress(t *testing.T) {
	s, arrived, release := newHoldServer(t)
	c := New(Options{MaxIdlePerHost: 4})
	do(t, c, "GET", s.url("/"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(t, c, "GET", s.url("/hold"))
	}()
	after(t, "a held request", arrived)
	addr := strings.TrimPrefix(s.url(""), "http://")
	c.Forget(addr)
	close(release)
	<-done
	before := s.accepted.Load()
	do(t, c, "GET", s.url("/"))
	if s.accepted.Load() != before+1 {
		t.Fatalf("a request after Forget reused a connection to the forgotten address")
	}
}
