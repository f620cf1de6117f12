package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/lint"
)

// Options configure a Controller.
type Options struct {
	// Base returns the file's part of the config, freshly parsed on every
	// call (Translate's result is finished in place). Required.
	Base func() (*config.Config, error)
	// Apply publishes a finished config (the server's Reload). Required.
	Apply func(*config.Config) error
	// Rest reaches the API server; nil builds it from the kubernetes
	// section (kubeconfig, else in-cluster, else $KUBECONFIG).
	Rest *rest.Config
	// Log receives what the controller does; nil discards it.
	Log *slog.Logger
	// Lease timings for the status writer's election; zero values take
	// client-go's usual 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Controller watches the cluster and keeps the server's config and the
// objects' status in step with it.
type Controller struct {
	o      Options
	k      *config.Kubernetes
	log    *slog.Logger
	kube   kubernetes.Interface
	gw     gwclient.Interface
	listen listers

	wake    chan struct{} // an object changed; capacity 1
	synced  atomic.Bool   // the first translation was applied
	applied chan struct{} // a translation was applied (for the status writer); capacity 1

	mu      sync.Mutex // guards last and exclude
	last    *outcome
	exclude map[Ref]string // what the last sync left out
	ready   atomic.Bool    // the caches have synced

	// configMaps are the ConfigMaps that Ingresses' custom-headers name,
	// as the last snapshot found them: a change to another ConfigMap
	// starts no translation.
	configMaps atomic.Pointer[map[Ref]bool]

	applied0 *config.Config  // the config last applied; only sync touches it
	linted   map[string]bool // the lint warnings last logged; only sync touches it
}

// outcome is one translation and whether it serves.
type outcome struct {
	res      *Result
	applyErr error
	at       time.Time
}

// New builds a controller for the kubernetes section of cfg. Nothing runs
// until Run.
func New(cfg *config.Config, o Options) (*Controller, error) {
	k := cfg.Kubernetes
	if k == nil {
		return nil, errors.New("the config has no kubernetes section")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	rc := o.Rest
	if rc == nil {
		var err error
		if rc, err = restConfig(k.Kubeconfig); err != nil {
			return nil, err
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "sturdy"
	c := &Controller{o: o, k: k, log: o.Log, wake: make(chan struct{}, 1), applied: make(chan struct{}, 1)}
	var err error
	if c.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.gw, err = gwclient.NewForConfig(rc); err != nil {
		return nil, err
	}
	return c, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		return rc, nil
	}
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return clientcmd.BuildConfigFromFlags("", env)
	}
	return nil, errors.New("no Kubernetes API: not in a pod, and neither kubernetes.kubeconfig nor $KUBECONFIG is set")
}

// Ready reports whether the first translation serves (/readyz).
func (c *Controller) Ready() (bool, string) {
	if c.synced.Load() {
		return true, ""
	}
	return false, "kubernetes: waiting for the first sync of Gateways, routes and Ingresses"
}

// Resync translates again (SIGHUP re-reads the file's part).
func (c *Controller) Resync() { c.poke() }

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends: every change is translated (gathered over
// kubernetes.debounce), applied, and its status written by whichever
// replica holds the lease.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l, starters, err := c.informers()
	if err != nil {
		return err
	}
	c.listen = l
	for _, s := range starters {
		s.Start(ctx.Done())
	}
	synced := make([]cache.InformerSynced, len(l.informer))
	for i, inf := range l.informer {
		synced[i] = inf.HasSynced
	}
	c.log.Info("kubernetes: watching", "controller", c.k.ControllerName, "ingress_class", c.k.IngressClassName(), "namespaces", c.k.Namespaces)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	c.ready.Store(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.elect(ctx) })
	c.poke()
	debounce := c.k.Debounce.D()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		}
		// Gather what arrives together (a rollout changes many slices).
		t := time.NewTimer(debounce)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		c.sync()
	}
}

// sync translates the caches and applies the result. A compile error
// that belongs to one object leaves that object out (its status says
// why) and the rest is tried again; an error of the file's own part
// keeps the serving config.
func (c *Controller) sync() {
	snap, err := c.snapshot()
	if err != nil {
		c.log.Error("kubernetes: cannot read the caches", "err", err)
		return
	}
	exclude := map[Ref]string{}
	var res *Result
	var applyErr error
	for range 5 {
		base, err := c.o.Base()
		if err != nil {
			applyErr = err
			break
		}
		res = Translate(Input{Base: base, Snap: snap, Exclude: exclude})
		applyErr = res.Config.Finish()
		if applyErr == nil && c.applied0 != nil && reflect.DeepEqual(res.Config, c.applied0) {
			break // nothing that serves changed (a status write, a new generation)
		}
		if applyErr == nil {
			if applyErr = c.o.Apply(res.Config); applyErr == nil {
				c.applied0 = res.Config
				c.lint(res.Config)
			}
		}
		if applyErr == nil {
			break
		}
		blamed := blame(applyErr, res.Origins)
		if len(blamed) == 0 {
			break
		}
		for ref, why := range blamed {
			c.log.Warn("kubernetes: object left out: its config does not compile", "object", ref.String(), "err", why)
			exclude[ref] = why
		}
		res = nil
	}
	if applyErr != nil {
		c.log.Error("kubernetes: the translated config was refused; the previous one keeps serving", "err", applyErr)
	} else {
		c.synced.Store(true)
	}
	if res == nil {
		return
	}
	c.mu.Lock()
	c.last = &outcome{res: res, applyErr: applyErr, at: time.Now()}
	c.exclude = exclude
	c.mu.Unlock()
	select {
	case c.applied <- struct{}{}:
	default:
	}
}

// lint logs the risky-but-valid settings of a translated config that
// were not already logged, as `sturdy check` prints them for a file.
func (c *Controller) lint(cfg *config.Config) {
	seen := map[string]bool{}
	for _, w := range lint.Check(cfg) {
		msg := w.Error()
		seen[msg] = true
		if !c.linted[msg] {
			c.log.Warn("kubernetes: risky config", "at", msg)
		}
	}
	c.linted = seen
}

// blame maps the errors of a refused config to the objects they came
// from, by key path.
func blame(err error, origins map[string]Ref) map[Ref]string {
	var list config.ErrorList
	if !errors.As(err, &list) {
		return nil
	}
	out := map[Ref]string{}
	for _, e := range list {
		ref, ok := originOf(e.Path, origins)
		if !ok {
			return nil // the file's own part: nothing to leave out
		}
		out[ref] = e.Path + ": " + e.Msg
	}
	return out
}

func originOf(path string, origins map[string]Ref) (Ref, bool) {
	for p := path; p != ""; {
		if r, ok := origins[p]; ok {
			return r, true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return Ref{}, false
}

// Build translates the caches as they are now onto a fresh base: the
// config a reload of the file (SIGHUP, the admin API) applies.
func (c *Controller) Build() (*config.Config, error) {
	if !c.ready.Load() {
		return nil, errors.New("kubernetes: the caches have not synced yet; the file's new content applies with the first sync")
	}
	snap, err := c.snapshot()
	if err != nil {
		return nil, err
	}
	base, err := c.o.Base()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	exclude := c.exclude
	c.mu.Unlock()
	res := Translate(Input{Base: base, Snap: snap, Exclude: exclude})
	if err := res.Config.Finish(); err != nil {
		return nil, err
	}
	return res.Config, nil
}

// latest is the last translation, or nil.
func (c *Controller) latest() *outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *Controller) String() string {
	return fmt.Sprintf("kubernetes controller %s", c.k.ControllerName)
}
