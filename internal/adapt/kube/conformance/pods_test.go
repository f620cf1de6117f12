//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/kube/kubetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// nodeName is the one Node the runner registers and binds every pod to:
// the EndpointSlice controller leaves out pods whose Node it does not know.
const nodeName = "sturdy-conformance"

// echoPorts are the ports echo-basic listens on, by the variable that
// sets each, with its default: what the suite's Services target.
var echoPorts = []struct {
	env  string
	port int
}{{"HTTP_PORT", 3000}, {"H2C_PORT", 3001}, {"HTTPS_PORT", 8443}}

// podRunner stands in for the scheduler and the kubelet: it binds every
// pod to its Node, runs echo-basic for each pod that asks for the suite's
// echo image (other pods, the suite's coredns, are marked ready with
// nothing behind them), gives the pod an address in 10.244.0.0/16 and
// marks it ready once its process answers, so that the EndpointSlice
// controller publishes it; and stops the process, and finishes the
// deletion, when the pod goes.
//
// echo-basic listens on the wildcard address at the ports its variables
// name, so every pod gets free ports of its own on loopback, and dial
// maps the pod's address and port, as the EndpointSlices carry them, to
// those. The API server refuses loopback addresses in EndpointSlices,
// hence the 10.244 addresses.
type podRunner struct {
	client kubernetes.Interface
	echo   string // the echo-basic binary
	dir    string // the pods' files (Secret volumes)
	logf   func(string, ...any)

	mu    sync.Mutex
	pods  map[string]*runningPod // by namespace/name
	addr  map[string]string      // "10.244.0.7:3000" -> "127.0.0.1:PORT"
	next  int                    // pod addresses given out
	queue workqueue.TypedRateLimitingInterface[string]
}

type runningPod struct {
	uid  string
	ip   string
	cmd  *exec.Cmd
	done chan struct{}
	dial []string // its keys in addr
	log  *podLog
}

// podLog is a process's output, line by line with the time each began,
// for the kubelet's log endpoint (the suite's mirror tests read the
// mirror backend's log since a time).
type podLog struct {
	mu    sync.Mutex
	lines []logLine
	part  []byte
}

type logLine struct {
	at   time.Time
	text string
}

func (l *podLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, b...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		l.lines = append(l.lines, logLine{time.Now(), string(l.part[:i])})
		l.part = l.part[i+1:]
	}
}

// since is the lines from the second of t on (the API passes sinceTime
// in whole seconds).
func (l *podLog) since(t time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ln := range l.lines {
		if !ln.at.Truncate(time.Second).Before(t) {
			b.WriteString(ln.text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func newPodRunner(client kubernetes.Interface, echo, dir string, logf func(string, ...any)) *podRunner {
	return &podRunner{client: client, echo: echo, dir: dir, logf: logf,
		pods: map[string]*runningPod{}, addr: map[string]string{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// dial is sturdy's dialer: it reaches the pods' processes, and nothing else.
func (r *podRunner) dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		r.mu.Lock()
		to, ok := r.addr[addr]
		r.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("pod runner: %s is no running pod's port", addr)
		}
		return d.DialContext(ctx, network, to)
	}
}

// run registers the Node and runs pods until ctx ends, then stops every
// process it started.
func (r *podRunner) run(ctx context.Context) error {
	// The kubelet's log endpoint, which the API server proxies pod logs to
	// (without a CA for kubelets it does not check the certificate).
	kubelet := httptest.NewUnstartedServer(http.HandlerFunc(r.containerLogs))
	kubelet.StartTLS()
	defer kubelet.Close()
	port := kubelet.Listener.Addr().(*net.TCPAddr).Port
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	node, err := r.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %v", nodeName, err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := r.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s: status: %v", nodeName, err)
	}
	f := informers.NewSharedInformerFactory(r.client, 0)
	inf := f.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(k)
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); r.queue.ShutDown() }()
	for {
		k, quit := r.queue.Get()
		if quit {
			break
		}
		if err := r.sync(ctx, inf.GetIndexer(), k); err != nil && ctx.Err() == nil {
			r.logf("pod runner: %s: %v (retrying)", k, err)
			r.queue.AddRateLimited(k)
		} else {
			r.queue.Forget(k)
		}
		r.queue.Done(k)
	}
	f.Shutdown()
	r.mu.Lock()
	pods := r.pods
	r.pods = map[string]*runningPod{}
	r.mu.Unlock()
	for _, p := range pods {
		p.stop()
	}
	return nil
}

// containerLogs answers the kubelet's GET /containerLogs/NS/POD/CONTAINER
// with the pod's process's output since sinceTime.
func (r *podRunner) containerLogs(w http.ResponseWriter, req *http.Request) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, "/containerLogs/"), "/")
	if len(parts) < 2 {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	p := r.pods[parts[0]+"/"+parts[1]]
	r.mu.Unlock()
	if p == nil || p.log == nil {
		http.Error(w, "no such container", http.StatusNotFound)
		return
	}
	var since time.Time
	if s := req.URL.Query().Get("sinceTime"); s != "" {
		since, _ = time.Parse(time.RFC3339, s)
	}
	io.WriteString(w, p.log.since(since))
}

func (r *podRunner) sync(ctx context.Context, idx cache.Indexer, key string) error {
	obj, exists, err := idx.GetByKey(key)
	if err != nil {
		return err
	}
	ns, name, _ := strings.Cut(key, "/")
	var pod *corev1.Pod
	if exists {
		pod = obj.(*corev1.Pod)
	}
	r.mu.Lock()
	running := r.pods[key]
	r.mu.Unlock()
	if running != nil && (pod == nil || pod.DeletionTimestamp != nil || string(pod.UID) != running.uid) {
		r.forget(key, running)
		running = nil
	}
	switch {
	case pod == nil:
		return nil
	case pod.DeletionTimestamp != nil:
		// What the kubelet does once the containers are gone.
		err := r.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	case pod.Spec.NodeName == "":
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: pod.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: nodeName}}
		err := r.client.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // bound already, or gone
		}
		return err
	case running != nil:
		return nil
	}
	p, err := r.start(ctx, pod)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.pods[key] = p
	r.mu.Unlock()
	return r.markReady(ctx, pod, p.ip)
}

func (r *podRunner) forget(key string, p *runningPod) {
	r.mu.Lock()
	delete(r.pods, key)
	for _, k := range p.dial {
		delete(r.addr, k)
	}
	r.mu.Unlock()
	p.stop()
}

// start runs the pod's first container, if it is echo-basic, and waits
// until each of its ports accepts connections.
func (r *podRunner) start(ctx context.Context, pod *corev1.Pod) (*runningPod, error) {
	r.mu.Lock()
	n := r.next
	r.next++
	r.mu.Unlock()
	p := &runningPod{uid: string(pod.UID), ip: fmt.Sprintf("10.244.%d.%d", n/250, n%250+1)}
	if len(pod.Spec.Containers) == 0 || !strings.Contains(pod.Spec.Containers[0].Image, "/echo-basic:") {
		return p, nil
	}
	c := pod.Spec.Containers[0]
	dir := filepath.Join(r.dir, pod.Namespace+"_"+pod.Name)
	mounts, err := r.volumes(ctx, pod, c, dir)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, e := range c.Env {
		v, err := r.envValue(ctx, pod, p.ip, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %v", e.Name, err)
		}
		for mount, local := range mounts {
			if v == mount || strings.HasPrefix(v, mount+"/") {
				v = local + strings.TrimPrefix(v, mount)
			}
		}
		env[e.Name] = v
	}
	var local []string
	for _, ep := range echoPorts {
		podPort := ep.port
		if v, ok := env[ep.env]; ok {
			if podPort, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("env %s=%q: %v", ep.env, v, err)
			}
		}
		free, err := kubetest.FreePort()
		if err != nil {
			return nil, err
		}
		env[ep.env] = strconv.Itoa(free)
		to := net.JoinHostPort("127.0.0.1", strconv.Itoa(free))
		key := net.JoinHostPort(p.ip, strconv.Itoa(podPort))
		p.dial = append(p.dial, key)
		if ep.env != "HTTPS_PORT" || env["TLS_SERVER_CERT"] != "" {
			local = append(local, to)
		}
		r.mu.Lock()
		r.addr[key] = to
		r.mu.Unlock()
	}
	cmd := exec.Command(r.echo)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p.log = &podLog{}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("echo-basic: %v", err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(p.done) }()
	switch {
	case env["GRPC_ECHO_SERVER"] != "":
		local = local[:1] // it listens on HTTP_PORT (and HTTPS_PORT) only
	case env["TCP_ECHO_SERVER"] != "" || env["UDP_ECHO_SERVER"] != "":
		local = nil // on ports of their own; sturdy routes neither
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range local {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-p.done:
				return nil, fmt.Errorf("echo-basic exited: %s", p.log.since(time.Time{}))
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				p.stop()
				return nil, fmt.Errorf("echo-basic does not listen on %s after 30s", a)
			}
		}
	}
	return p, nil
}

func (p *runningPod) stop() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
}

// volumes writes the container's Secret and ConfigMap volumes under dir,
// and returns their mount paths and where they are.
func (r *podRunner) volumes(ctx context.Context, pod *corev1.Pod, c corev1.Container, dir string) (map[string]string, error) {
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			var data map[string][]byte
			var items []corev1.KeyToPath
			switch {
			case v.Secret != nil:
				s, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("volume %s: %v", v.Name, err)
				}
				data, items = s.Data, v.Secret.Items
			case v.ConfigMap != nil:
				cm, err := r.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("volume %s: %v", v.Name, err)
				}
				data, items = map[string][]byte{}, v.ConfigMap.Items
				for k, s := range cm.Data {
					data[k] = []byte(s)
				}
			default:
				continue
			}
			local := filepath.Join(dir, v.Name)
			if err := os.MkdirAll(local, 0o700); err != nil {
				return nil, err
			}
			// Without items every key is a file of its name.
			if items == nil {
				for k := range data {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				f := filepath.Join(local, it.Path)
				if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
					return nil, err
				}
				if err := os.WriteFile(f, data[it.Key], 0o600); err != nil {
					return nil, err
				}
			}
			mounts[m.MountPath] = local
		}
	}
	return mounts, nil
}

// envValue is what the kubelet gives a variable: its value, or the
// downward API's field, or a Secret's or ConfigMap's key.
func (r *podRunner) envValue(ctx context.Context, pod *corev1.Pod, ip string, e corev1.EnvVar) (string, error) {
	switch {
	case e.ValueFrom == nil:
		return e.Value, nil
	case e.ValueFrom.FieldRef != nil:
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.name":
			return pod.Name, nil
		case "metadata.namespace":
			return pod.Namespace, nil
		case "metadata.uid":
			return string(pod.UID), nil
		case "spec.nodeName":
			return nodeName, nil
		case "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		case "status.podIP", "status.podIPs":
			return ip, nil
		case "status.hostIP", "status.hostIPs":
			return "127.0.0.1", nil
		}
		return "", fmt.Errorf("field %s is not filled in by the pod runner", e.ValueFrom.FieldRef.FieldPath)
	case e.ValueFrom.SecretKeyRef != nil:
		s, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, e.ValueFrom.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return string(s.Data[e.ValueFrom.SecretKeyRef.Key]), nil
	case e.ValueFrom.ConfigMapKeyRef != nil:
		cm, err := r.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, e.ValueFrom.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return cm.Data[e.ValueFrom.ConfigMapKeyRef.Key], nil
	}
	return "", fmt.Errorf("valueFrom is not filled in by the pod runner")
}

// markReady writes what a kubelet would once the containers run.
func (r *podRunner) markReady(ctx context.Context, pod *corev1.Pod, ip string) error {
	now := metav1.Now()
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.HostIP, pod.Status.HostIPs = "192.0.2.1", []corev1.HostIP{{IP: "192.0.2.1"}}
	pod.Status.StartTime = &now
	pod.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image,
			Ready: true, Started: new(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	_, err := r.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		// Next time round it starts again, from a fresh pod.
		key := pod.Namespace + "/" + pod.Name
		r.mu.Lock()
		p := r.pods[key]
		r.mu.Unlock()
		if p != nil {
			r.forget(key, p)
		}
	}
	return err
}
