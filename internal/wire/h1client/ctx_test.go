package h1client

import (
	"context"
	"testing"
)

// hookCtx is a context with an AfterFunc method of its own, as the native
// front end's request contexts have.
type hookCtx struct {
	context.Context
	done       chan struct{}
	registered int
}

func (c *hookCtx) Done() <-chan struct{} { return c.done }

func (c *hookCtx) AfterFunc(f func()) func() bool {
	c.registered++
	return func() bool { return true }
}

// WithoutResend's mark keeps its parent's AfterFunc in reach: behind
// context.WithValue's, context.AfterFunc (and every context derived with
// a cancel) would wait for the parent in a goroutine of its own.
func TestWithoutResendKeepsTheParentsAfterFunc(t *testing.T) {
	parent := &hookCtx{Context: context.Background(), done: make(chan struct{})}
	ctx := WithoutResend(parent)
	context.AfterFunc(ctx, func() {})()
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	if parent.registered != 2 {
		t.Fatalf("the parent's AfterFunc was called %d times, want 2 (AfterFunc, WithCancel)", parent.registered)
	}
	if child.Value(noResendKey{}) != true {
		t.Fatal("the mark is lost")
	}
}

// A context derived from the request's by values alone (an httptrace
// trace, a request id) keeps the request context's AfterFunc: behind
// context.WithValue, context.AfterFunc would wait in a goroutine.
func TestKeepAfterFuncReachesTheBaseThroughValues(t *testing.T) {
	type key struct{}
	base := &hookCtx{Context: context.Background(), done: make(chan struct{})}
	ctx := KeepAfterFunc(context.WithValue(base, key{}, "id"), base)
	context.AfterFunc(ctx, func() {})()
	afterFunc(ctx, func() {})()
	if base.registered != 2 {
		t.Fatalf("the base's AfterFunc was called %d times, want 2", base.registered)
	}
	if ctx.Value(key{}) != "id" || ctx.Done() != base.done {
		t.Fatal("the derived context lost its value or its end")
	}
	if plain := context.WithValue(context.Background(), key{}, 1); KeepAfterFunc(plain, context.Background()) != plain {
		t.Fatal("a base without AfterFunc changed the context")
	}
}
