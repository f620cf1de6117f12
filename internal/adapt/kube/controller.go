package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
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

	m metrics

	applied0 *config.Config  // the config last applied; only sync touches it
	linted   map[string]bool // the lint warnings last logged; only sync touches it
	// unresolved are the unresolved backendRefs last logged; only sync
	// touches it.
	unresolved map[string]bool
}

// outcome is one translation and whether it serves.
type outcome struct {
	res      *Result
	applyErr error
	at       time.Time
	synced   time.Time // the last translation that serves (applied or unchanged); zero before
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
	result := "applied"
	for range 5 {
		base, err := c.o.Base()
		if err != nil {
			applyErr = err
			break
		}
		res = Translate(Input{Base: base, Snap: snap, Exclude: exclude})
		applyErr = res.Config.Finish()
		if applyErr == nil && c.applied0 != nil && reflect.DeepEqual(res.Config, c.applied0) {
			result = "unchanged"
			break // nothing that serves changed (a status write, a new generation)
		}
		if applyErr == nil {
			if applyErr = c.o.Apply(res.Config); applyErr == nil {
				c.applied0 = res.Config
				c.lint(res.Config, res.Origins)
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
	now := time.Now()
	var synced time.Time
	if applyErr != nil {
		result = "refused"
		c.log.Error("kubernetes: the translated config was refused; the previous one keeps serving", "err", applyErr)
	} else {
		c.synced.Store(true)
		synced = now
	}
	c.m.synced(result)
	if res == nil {
		return
	}
	if applyErr == nil {
		c.noteUnresolved(res)
	}
	c.mu.Lock()
	if synced.IsZero() && c.last != nil {
		synced = c.last.synced
	}
	c.last = &outcome{res: res, applyErr: applyErr, at: now, synced: synced}
	c.exclude = exclude
	c.mu.Unlock()
	select {
	case c.applied <- struct{}{}:
	default:
	}
}

// lint logs the risky-but-valid settings of an applied config, as
// `sturdy check` prints them for a file: each warning of the file's own
// part on its own line, as in file mode, since its author can act on it;
// those of translated entries (a Service with one ready pod is a pool
// with a single host) once per object, in one line, at Info: nobody can
// edit the translation, and a fleet's worth of them would drown the log.
// A line is logged again only when its object's warnings change, never
// because entries moved (the key is the object and the messages, not
// the key paths).
func (c *Controller) lint(cfg *config.Config, origins map[string]Ref) {
	seen := map[string]bool{}
	byObject := map[Ref][]string{}
	for _, w := range lint.Check(cfg) {
		if ref, ok := originOf(w.Path, origins); ok {
			if !slices.Contains(byObject[ref], w.Msg) {
				byObject[ref] = append(byObject[ref], w.Msg)
			}
			continue
		}
		msg := w.Error()
		seen[msg] = true
		if !c.linted[msg] {
			c.log.Warn("kubernetes: risky config", "at", msg)
		}
	}
	refs := slices.SortedFunc(maps.Keys(byObject), func(a, b Ref) int { return strings.Compare(a.String(), b.String()) })
	for _, ref := range refs {
		msgs := byObject[ref]
		slices.Sort(msgs)
		key := ref.String() + "\x00" + strings.Join(msgs, "\x00")
		seen[key] = true
		if !c.linted[key] {
			c.log.Info("kubernetes: what sturdy check would warn of in a file, for the config translated from one object", "object", ref.String(), "warnings", len(msgs), "first", msgs[0])
		}
	}
	c.linted = seen
}

// noteUnresolved logs each route's unresolved backendRefs once per
// generation and message: their share of the route is answered 500
// (ResolvedRefs=False says why), which no empty pool stands for.
func (c *Controller) noteUnresolved(res *Result) {
	seen := map[string]bool{}
	note := func(ref Ref, st gwv1.RouteStatus) {
		for _, p := range st.Parents {
			for _, cd := range p.Conditions {
				if cd.Type != "ResolvedRefs" || cd.Status != metav1.ConditionFalse {
					continue
				}
				key := ref.String() + "\x00" + strconv.FormatInt(cd.ObservedGeneration, 10) + "\x00" + cd.Message
				if !seen[key] && !c.unresolved[key] {
					c.log.Warn("kubernetes: unresolved backend: its share of the route is answered 500 until the reference resolves", "object", ref.String(), "reason", cd.Reason, "why", cd.Message)
				}
				seen[key] = true
			}
		}
	}
	for ref, st := range res.Routes {
		note(ref, st.RouteStatus)
	}
	for ref, st := range res.GRPCRoutes {
		note(ref, st.RouteStatus)
	}
	c.unresolved = seen
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
