package kube

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// statusPeriod is how often the leader checks every status again, to
// heal a write that lost a conflict.
const statusPeriod = 30 * time.Second

// identity is this replica's name in the lease.
func (c *Controller) identity() string {
	if id := c.k.Lease.Identity; id != "" {
		return id
	}
	if id := os.Getenv("POD_NAME"); id != "" {
		return id
	}
	h, _ := os.Hostname()
	return h
}

func (c *Controller) leaseNamespace() string {
	if ns := c.k.Lease.Namespace; ns != "" {
		return ns
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

// elect takes part in the status writer's election until ctx ends: the
// replica that holds the lease writes status; every replica serves.
func (c *Controller) elect(ctx context.Context) {
	id := c.identity()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.leaseNamespace(), Name: c.k.Lease.Name},
		Client:     c.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	lc := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            "sturdy status",
		LeaseDuration:   or(c.o.LeaseDuration, 15*time.Second),
		RenewDeadline:   or(c.o.RenewDeadline, 10*time.Second),
		RetryPeriod:     or(c.o.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.log.Info("kubernetes: this replica writes status", "lease", lock.LeaseMeta.Namespace+"/"+lock.LeaseMeta.Name, "identity", id)
				c.m.leader.Store(true)
				c.m.leaderships.Add(1)
				c.writeStatus(ctx)
			},
			OnStoppedLeading: func() {
				c.m.leader.Store(false)
				c.log.Info("kubernetes: this replica no longer writes status", "identity", id)
			},
		},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(lc)
		if err != nil {
			c.log.Error("kubernetes: no status writer election", "err", err)
			return
		}
		le.Run(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(lc.RetryPeriod):
		}
	}
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// writeStatus writes the latest translation's status while this replica
// leads: at once, after every sync, and every statusPeriod.
func (c *Controller) writeStatus(ctx context.Context) {
	tick := time.NewTicker(statusPeriod)
	defer tick.Stop()
	posted := map[string]bool{}
	for {
		if o := c.latest(); o != nil {
			c.writeAll(ctx, o, posted)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.applied:
		case <-tick.C:
		}
	}
}

func (c *Controller) writeAll(ctx context.Context, o *outcome, posted map[string]bool) {
	snap, err := c.snapshot()
	if err != nil {
		return
	}
	res := o.res
	addrs := c.addresses(ctx)
	fail := func(kind, what string, err error) {
		c.m.wrote(kind, err)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("kubernetes: status not written; tried again later", "object", what, "err", err)
		}
	}
	for _, gc := range snap.GatewayClasses {
		want, ok := res.Classes[gc.Name]
		if !ok {
			continue
		}
		st := gc.Status.DeepCopy()
		st.Conditions = merge(st.Conditions, want.Conditions)
		st.SupportedFeatures = want.SupportedFeatures
		if !apiequality.Semantic.DeepEqual(*st, gc.Status) {
			n := gc.DeepCopy()
			n.Status = *st
			_, err := c.gw.GatewayV1().GatewayClasses().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			fail("GatewayClass", "GatewayClass "+gc.Name, err)
		}
	}
	for _, gw := range snap.Gateways {
		ref := refOf("Gateway", gw)
		want, ok := res.Gateways[ref]
		if !ok {
			continue
		}
		conds := want.Conditions
		if o.applyErr != nil {
			conds = append(conds, cond("Programmed", false, string(gwv1.GatewayReasonInvalid), "sturdy refused the translated config and serves the previous one: "+clip(o.applyErr.Error()), res.Generations[ref]))
		}
		st := gw.Status.DeepCopy()
		st.Conditions = merge(st.Conditions, conds)
		st.Addresses = gatewayAddresses(addrs)
		if len(res.Config.Kubernetes.GatewayAddresses) > 0 {
			// Its own address, or none while it has none.
			st.Addresses = want.Addresses
		}
		var ls []gwv1.ListenerStatus
		for _, wl := range want.Listeners {
			nl := wl
			nl.Conditions = nil
			for _, old := range gw.Status.Listeners {
				if old.Name == wl.Name {
					nl.Conditions = old.Conditions
				}
			}
			nl.Conditions = merge(nl.Conditions, wl.Conditions)
			if nl.SupportedKinds == nil {
				nl.SupportedKinds = []gwv1.RouteGroupKind{}
			}
			ls = append(ls, nl)
		}
		st.Listeners = ls
		if !apiequality.Semantic.DeepEqual(*st, gw.Status) {
			n := gw.DeepCopy()
			n.Status = *st
			_, err := c.gw.GatewayV1().Gateways(gw.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
			fail(ref.Kind, ref.String(), err)
		}
	}
	for _, r := range snap.HTTPRoutes {
		ref := refOf("HTTPRoute", r)
		// A route none of whose parents is sturdy's now (its parentRef
		// moved, its Gateway was deleted) loses the entries sturdy wrote.
		var want gwv1.RouteStatus
		if w, ok := res.Routes[ref]; ok {
			want = w.RouteStatus
		}
		if st := c.routeStatus(r.Status.RouteStatus, want); st != nil {
			n := r.DeepCopy()
			n.Status.RouteStatus = *st
			_, err := c.gw.GatewayV1().HTTPRoutes(r.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
			fail(ref.Kind, ref.String(), err)
		}
	}
	for _, r := range snap.GRPCRoutes {
		ref := refOf("GRPCRoute", r)
		var want gwv1.RouteStatus
		if w, ok := res.GRPCRoutes[ref]; ok {
			want = w.RouteStatus
		}
		if st := c.routeStatus(r.Status.RouteStatus, want); st != nil {
			n := r.DeepCopy()
			n.Status.RouteStatus = *st
			_, err := c.gw.GatewayV1().GRPCRoutes(r.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
			fail(ref.Kind, ref.String(), err)
		}
	}
	for _, ing := range snap.Ingresses {
		ref := refOf("Ingress", ing)
		ir, ok := res.Ingresses[ref]
		if !ok {
			continue
		}
		for _, msg := range ir.Events {
			key := eventKey(ing.UID, ing.Generation, clip(msg))
			if posted[key] {
				continue
			}
			if seen := "listed/" + string(ing.UID); !posted[seen] {
				// A new leader first reads what earlier ones posted, so
				// that a change of leader posts nothing twice.
				if err := c.postedEvents(ctx, ing, posted); err != nil {
					fail("Event", ref.String()+" events", err)
					continue
				}
				posted[seen] = true
				if posted[key] {
					continue
				}
			}
			err := c.event(ctx, ing, msg)
			fail("Event", ref.String()+" event", err)
			if err == nil {
				posted[key] = true
			}
		}
		var lb []networkingv1.IngressLoadBalancerIngress
		if ir.Served && o.applyErr == nil {
			lb = ingressAddresses(addrs)
		}
		if !apiequality.Semantic.DeepEqual(lb, ing.Status.LoadBalancer.Ingress) && !(len(lb) == 0 && len(ing.Status.LoadBalancer.Ingress) == 0) {
			n := ing.DeepCopy()
			n.Status.LoadBalancer.Ingress = lb
			_, err := c.kube.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, n, metav1.UpdateOptions{})
			fail(ref.Kind, ref.String(), err)
		}
	}
}

// routeStatus is a route's status with sturdy's parents set to want
// (other controllers' entries are kept), or nil when that changes nothing.
func (c *Controller) routeStatus(have, want gwv1.RouteStatus) *gwv1.RouteStatus {
	st := have.DeepCopy()
	// Never null: the CRDs require the list, empty or not.
	parents := []gwv1.RouteParentStatus{}
	for _, p := range st.Parents {
		if string(p.ControllerName) != c.k.ControllerName {
			parents = append(parents, p) // another implementation's
		}
	}
	for _, wp := range want.Parents {
		np := wp
		np.Conditions = nil
		for _, old := range have.Parents {
			if string(old.ControllerName) == c.k.ControllerName && apiequality.Semantic.DeepEqual(old.ParentRef, wp.ParentRef) {
				np.Conditions = old.Conditions
			}
		}
		np.Conditions = merge(np.Conditions, wp.Conditions)
		parents = append(parents, np)
	}
	st.Parents = parents
	if apiequality.Semantic.DeepEqual(*st, have) {
		return nil
	}
	return st
}

// merge sets each wanted condition, keeping lastTransitionTime where the
// status did not change; conditions sturdy does not write are kept.
func merge(have, want []metav1.Condition) []metav1.Condition {
	out := append([]metav1.Condition(nil), have...)
	for _, c := range want {
		meta.SetStatusCondition(&out, c)
	}
	return out
}

func clip(s string) string {
	if len(s) > 1000 {
		return s[:1000] + "..."
	}
	return s
}

// addresses are where clients reach sturdy: kubernetes.addresses, else
// the publish Service's load-balancer addresses, else its cluster IPs.
func (c *Controller) addresses(ctx context.Context) []string {
	if len(c.k.Addresses) > 0 {
		return c.k.Addresses
	}
	ns, name, ok := strings.Cut(c.k.PublishService, "/")
	if !ok {
		return nil
	}
	svc, err := c.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.log.Warn("kubernetes: cannot read the publish Service", "service", c.k.PublishService, "err", err)
		return nil
	}
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else if in.Hostname != "" {
			out = append(out, in.Hostname)
		}
	}
	if len(out) == 0 {
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != corev1.ClusterIPNone && ip != "" {
				out = append(out, ip)
			}
		}
	}
	return out
}

func gatewayAddresses(addrs []string) []gwv1.GatewayStatusAddress {
	var out []gwv1.GatewayStatusAddress
	for _, a := range addrs {
		t := gwv1.HostnameAddressType
		if net.ParseIP(a) != nil {
			t = gwv1.IPAddressType
		}
		out = append(out, gwv1.GatewayStatusAddress{Type: &t, Value: a})
	}
	return out
}

func ingressAddresses(addrs []string) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range addrs {
		if net.ParseIP(a) != nil {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: a})
		} else {
			out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: a})
		}
	}
	return out
}

// generationAnnotation on an Event sturdy posted is the generation of
// the Ingress it is about: a warning is posted once per generation, by
// whichever replica leads.
const generationAnnotation = "sturdyproxy.io/generation"

func eventKey(uid types.UID, gen int64, msg string) string {
	return string(uid) + "/" + strconv.FormatInt(gen, 10) + "/" + msg
}

// postedEvents marks in posted the events sturdy's controller already
// posted about ing (by any replica: the Events outlive a leader).
func (c *Controller) postedEvents(ctx context.Context, ing *networkingv1.Ingress, posted map[string]bool) error {
	list, err := c.kube.CoreV1().Events(ing.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(ing.UID)).String(),
	})
	if err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.ReportingController != c.k.ControllerName {
			continue
		}
		gen, err := strconv.ParseInt(ev.Annotations[generationAnnotation], 10, 64)
		if err != nil {
			continue
		}
		posted[eventKey(ing.UID, gen, ev.Message)] = true
	}
	return nil
}

// event posts a Warning event on an Ingress.
func (c *Controller) event(ctx context.Context, ing *networkingv1.Ingress, msg string) error {
	reason := "Unsupported"
	if strings.HasPrefix(msg, "not served") {
		reason = "NotServed"
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ing.Name + ".", Namespace: ing.Namespace,
			Annotations: map[string]string{generationAnnotation: strconv.FormatInt(ing.Generation, 10)}},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Ingress", APIVersion: "networking.k8s.io/v1", Namespace: ing.Namespace,
			Name: ing.Name, UID: ing.UID, ResourceVersion: ing.ResourceVersion,
		},
		Reason: reason, Message: clip(msg), Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "sturdy"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: c.k.ControllerName, ReportingInstance: c.identity(),
	}
	_, err := c.kube.CoreV1().Events(ing.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
