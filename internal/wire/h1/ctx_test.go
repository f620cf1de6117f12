package h1

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// The request's context runs what context.AfterFunc registers when the
// client leaves, and takes back what is stopped, itself: the upstream
// client registers one function per exchange, and the context package's
// own way costs a context, a closure and a map of children each time.
func TestRequestContextRunsAfterFuncsWhenTheClientLeaves(t *testing.T) {
	ran, stoppedRan, running := make(chan error, 1), make(chan struct{}, 1), make(chan struct{})
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, ok := ctx.(interface{ AfterFunc(func()) func() bool }); !ok {
			t.Errorf("request context %T has no AfterFunc method", ctx)
		}
		stop := context.AfterFunc(ctx, func() { stoppedRan <- struct{}{} })
		if !stop() {
			t.Error("stop before the end did not stop the function")
		}
		context.AfterFunc(ctx, func() { ran <- ctx.Err() })
		child, cancel := context.WithTimeout(ctx, time.Minute) // through AfterFunc, not a goroutine
		defer cancel()
		close(running)
		select {
		case <-child.Done():
		case <-time.After(10 * time.Second):
			t.Error("the derived context did not end with the request's")
		}
	}), nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-running
	c.Close()
	select {
	case err := <-ran:
		if err != context.Canceled {
			t.Fatalf("context in the AfterFunc: %v, want canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the AfterFunc never ran")
	}
	select {
	case <-stoppedRan:
		t.Fatal("a stopped AfterFunc ran")
	default:
	}
}

// The context ends when the handler returns, as net/http's; what is
// registered after that runs at once.
func TestRequestContextEndsWithTheHandler(t *testing.T) {
	got := make(chan context.Context, 1)
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Context()
	}), nil)
	c, br := dialRaw(t, addr)
	roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	ctx := <-got
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end with the handler")
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err after the handler: %v", ctx.Err())
	}
	ran := make(chan struct{})
	if context.AfterFunc(ctx, func() { close(ran) })() {
		t.Fatal("stop after the end reported stopping")
	}
	<-ran
	if v := ctx.Value(http.LocalAddrContextKey); v == nil {
		t.Fatal("the connection's values are gone")
	}
}
