// Package kubetest runs a real Kubernetes API server for tests: etcd and
// kube-apiserver, built from the Go module proxy by the tools module in
// tools/k8s (once; the binaries are cached under the user cache directory,
// keyed by that module's go.sum), started on loopback ports by TestMain,
// with the Gateway API CRDs installed, and stopped by PID when the tests
// end. There is no controller manager, scheduler or kubelet: tests make
// the Services, EndpointSlices and Secrets themselves, one namespace each.
//
// Under -short, or when the binaries cannot be built, the tests that need
// the cluster skip and say why.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CRDs are the Gateway API CRDs (standard channel) installed, from the
// sigs.k8s.io/gateway-api module that sturdy builds with.
var CRDs = []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"}

// Env is what TestMain found: a running cluster, or why there is none.
type Env struct {
	c    *Cluster
	skip string
}

// Cluster returns the running cluster, or skips t.
func (e *Env) Cluster(t testing.TB) *Cluster {
	t.Helper()
	if e.c == nil {
		t.Skip(e.skip)
	}
	return e.c
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a typed client with Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file with the same credentials.
	Kubeconfig string

	bin   string
	dir   string
	procs []*exec.Cmd
}

// Main is a TestMain: it starts the cluster (unless -short), runs the
// tests and stops it. Use it as
//
//	var env kubetest.Env
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }
func Main(m *testing.M, env *Env) int {
	flag.Parse()
	if testing.Short() {
		env.skip = "-short: the tests against a real kube-apiserver and etcd are long"
		return m.Run()
	}
	bin, err := Binaries()
	if err != nil {
		env.skip = "no kube-apiserver and etcd: " + err.Error()
		fmt.Fprintln(os.Stderr, "kubetest:", env.skip)
		return m.Run()
	}
	c, err := Start(bin)
	if err != nil {
		env.skip = "cannot start kube-apiserver and etcd: " + err.Error()
		fmt.Fprintln(os.Stderr, "kubetest:", env.skip)
		return m.Run()
	}
	env.c = c
	code := m.Run()
	c.Stop()
	return code
}

// Binaries returns the directory holding kube-apiserver and etcd, building
// them with tools/k8s when the cache has none for its go.sum. It takes
// minutes the first time (.ci/run builds them before the tests).
func Binaries() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	mod := filepath.Join(root, "tools", "k8s")
	sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("tools/k8s: %v", err)
	}
	h := sha256.Sum256(sum)
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "sturdy", "k8s-"+hex.EncodeToString(h[:6]))
	if have(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Two test binaries may ask at once: the second waits for the first's build.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if have(dir) {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	fmt.Fprintf(os.Stderr, "kubetest: building kube-apiserver, kube-controller-manager and etcd into %s (minutes, once)\n", dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", tmp+"/", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "./etcd")
	cmd.Dir = mod
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build in tools/k8s failed (%v): %s", err, tail(out.String(), 2000))
	}
	for _, b := range binaries {
		if err := os.Rename(filepath.Join(tmp, b), filepath.Join(dir, b)); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(os.Stderr, "kubetest: built in %s\n", time.Since(start).Round(time.Second))
	return dir, nil
}

// binaries are what tools/k8s builds. The controller manager is only for
// the conformance suite (its Deployments and EndpointSlices); it is built
// with the others so that one cache directory has all of them.
var binaries = []string{"kube-apiserver", "kube-controller-manager", "etcd"}

func have(dir string) bool {
	for _, b := range binaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/sturdyproxy/sturdy\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the sturdy repository")
		}
		dir = parent
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// FreePort is a loopback TCP port that was free a moment ago: the kernel
// may give it out again before the caller binds it, so callers retry.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts etcd and kube-apiserver from bin on loopback and installs
// the CRDs. On error nothing is left running.
func Start(bin string) (c *Cluster, err error) {
	dir, err := os.MkdirTemp("", "sturdy-kube-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{bin: bin, dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	client, peer, secure := 0, 0, 0
	for _, p := range []*int{&client, &peer, &secure} {
		if *p, err = FreePort(); err != nil {
			return nil, err
		}
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	if err := c.run(filepath.Join(bin, "etcd"), "etcd",
		"--data-dir", filepath.Join(dir, "etcd"), "--unsafe-no-fsync", "--log-level", "error",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL); err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "sa.key")
	pubFile := filepath.Join(dir, "sa.pub")
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	if err := c.run(filepath.Join(bin, "kube-apiserver"), "kube-apiserver",
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(secure), "--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", tokens,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", pubFile, "--service-account-signing-key-file", keyFile,
		"--service-cluster-ip-range", "10.96.0.0/16", "-v", "0"); err != nil {
		return nil, err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(secure)
	c.Config = &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	if err := c.waitReady(host, token, 60*time.Second); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]\n"+
		"users: [{name: admin, user: {token: %q}}]\ncontexts: [{name: test, context: {cluster: test, user: admin}}]\ncurrent-context: test\n", host, token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o600); err != nil {
		return nil, err
	}
	if err := c.installCRDs(); err != nil {
		return nil, err
	}
	return c, nil
}

// StartControllerManager starts the kube-controller-manager controllers
// that the conformance suite's manifests need: Deployments, ReplicaSets,
// EndpointSlices (from the pods' status), namespaces (their deletion),
// service accounts (each namespace's default one, which pod admission
// asks for) and garbage collection. There is still no scheduler or
// kubelet: whoever wants pods to run binds and runs them. Stop stops it
// with the rest.
func (c *Cluster) StartControllerManager() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	return c.run(filepath.Join(c.bin, "kube-controller-manager"), "kube-controller-manager",
		"--kubeconfig", c.Kubeconfig, "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(c.dir, "kcm-certs"),
		"--controllers", "deployment-controller,replicaset-controller,endpointslice-controller,namespace-controller,serviceaccount-controller,garbage-collector-controller",
		"-v", "0")
}

// run starts one server, its output in the cluster's directory.
func (c *Cluster) run(bin, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: %v", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

func (c *Cluster) waitReady(host, token string, within time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		for _, p := range c.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("%s exited: %s", p.Path, c.logTail())
			}
		}
		req, _ := http.NewRequest("GET", host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (%s): %s", within, last, c.logTail())
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "kube-apiserver.log"))
	e, _ := os.ReadFile(filepath.Join(c.dir, "etcd.log"))
	return tail(string(e), 800) + "\n" + tail(string(b), 1500)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs installs the Gateway API CRDs and waits until they are
// established, and a little more (a custom resource created right after
// its CRD becomes established waits for the discovery refresh).
func (c *Cluster) installCRDs() error {
	dir, err := gatewayAPIDir()
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for _, n := range CRDs {
		b, err := os.ReadFile(filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_"+n+".yaml"))
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return fmt.Errorf("CRD %s: %v", n, err)
		}
		if _, err := dc.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("CRD %s: %v", n, err)
		}
		names = append(names, obj.GetName())
	}
	for _, n := range names {
		for {
			o, err := dc.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err == nil && established(o) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("CRD %s not established: %v", n, ctx.Err())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	return nil
}

func established(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// gatewayAPIDir is the sigs.k8s.io/gateway-api module in the module
// cache: the version sturdy's go.mod names, so that the CRDs match the
// types the controller decodes.
func gatewayAPIDir() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("sigs.k8s.io/gateway-api is not in the module cache; run go mod download")
	}
	return dir, nil
}

// Stop stops every process by its PID and removes the cluster's files.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	c.procs = nil
	os.RemoveAll(c.dir)
}

// Namespace creates a namespace for one test and deletes it at the end.
func (c *Cluster) Namespace(t testing.TB, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	t.Cleanup(func() { c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func insecureTLS() *tls.Config {
	// The API server's self-signed certificate, made at start in cert-dir.
	return &tls.Config{InsecureSkipVerify: true}
}
