//go:build conformance

package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	gwconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/go-logr/logr"
	"github.com/sturdyproxy/sturdy/internal/adapt/kube"
	"github.com/sturdyproxy/sturdy/internal/adapt/kube/kubetest"
	"github.com/sturdyproxy/sturdy/internal/server"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

var env kubetest.Env

// update makes the suite's report replace the one in docs/; without it the
// report goes to the test's temporary directory, so a run in CI or on a
// laptop leaves the checkout as it was.
var update = flag.Bool("update", false, "write the ConformanceReport to "+reportFile)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

const (
	className      = "sturdy"
	controllerName = "sturdyproxy.io/conformance"
	// gatewayPool is kubernetes.gateway_addresses: the addresses the suite
	// dials, on its listeners' own ports.
	gatewayPool = "127.30.0.0/24"
	// ingressAddr is kubernetes.bind_address, out of the way of the pool.
	ingressAddr = "127.30.1.1"
	// reportFile is where the ConformanceReport goes, from the repository
	// root.
	reportFile = "docs/gateway-api-conformance-report.yaml"
)

// TestGatewayAPIConformance runs the upstream suite against sturdy, in
// this process, on the real API server, with the controller manager
// running the suite's Deployments and the pod runner their pods. It
// prints the suite's summary, a last line "N passed, N failed, N skipped",
// and writes the report (to docs/ with -update).
func TestGatewayAPIConformance(t *testing.T) {
	c := env.Cluster(t)
	if l, err := net.Listen("tcp", "127.30.0.255:80"); err != nil {
		t.Skipf("cannot bind port 80 on loopback (%v): the suite dials the Gateways' own ports; run as root or with CAP_NET_BIND_SERVICE", err)
	} else {
		l.Close()
	}
	if err := c.StartControllerManager(); err != nil {
		t.Fatal(err)
	}
	echo := buildEcho(t)
	ctx, cancel := context.WithCancel(context.Background())
	runner := newPodRunner(c.Client, echo, t.TempDir(), t.Logf)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := runner.run(ctx); err != nil {
			t.Errorf("pod runner: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })

	gc, err := gwclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: gwv1.GatewayClassSpec{ControllerName: controllerName}}
	if _, err := gc.GatewayV1().GatewayClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startSturdy(t, c, runner)
	// The suite reads the features to test from the class's status.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		gwc, err := gc.GatewayV1().GatewayClasses().Get(context.Background(), className, metav1.GetOptions{})
		if err == nil && len(gwc.Status.SupportedFeatures) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GatewayClass %s has no supportedFeatures after a minute (%v)", className, err)
		}
	}

	opts := options(t, c)
	var mu sync.Mutex
	results := map[string]string{}
	opts.Hook = func(t *testing.T, test suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case t.Failed():
			results[test.ShortName] = "failed"
		case t.Skipped():
			results[test.ShortName] = "skipped"
		default:
			results[test.ShortName] = "passed"
		}
	}
	cs, err := suite.NewConformanceTestSuite(opts)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Most of the suite's tests are parallel: they run after Run returns,
	// and the report is ready only when they are done.
	t.Cleanup(func() {
		report, err := cs.Report()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		summarise(t, report, results, time.Since(start))
	})
	cs.Setup(t, tests.ConformanceTests)
	t.Logf("setup took %s", time.Since(start).Round(time.Second))
	if err := cs.Run(t, tests.ConformanceTests); err != nil {
		t.Fatal(err)
	}
}

// startSturdy runs sturdy in Kubernetes mode, cluster-wide, with the pod
// runner's dialer.
func startSturdy(t *testing.T, c *kubetest.Cluster, runner *podRunner) {
	yaml := fmt.Sprintf(`admin: { listen: 127.0.0.1:0 }
kubernetes:
  controller_name: %s
  ingress_class: ""
  bind_address: %s
  gateway_addresses: [%s]
  lease: { namespace: default, identity: conformance }
  debounce: 50ms
`, controllerName, ingressAddr, gatewayPool)
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, _, _, err := kube.NewServer("conformance.yaml", []byte(yaml), log, kube.Wiring{
		Options: kube.Options{Rest: c.Config, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
		Server:  []server.Option{server.WithDialer(runner.dial)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if t.Failed() {
			// Too long for the test's output: a file to read after.
			f := filepath.Join(os.TempDir(), "sturdy-conformance.log")
			if err := os.WriteFile(f, []byte(logs.String()), 0o600); err == nil {
				t.Logf("sturdy's log is in %s", f)
			}
		}
	})
}

func options(t *testing.T, c *kubetest.Cluster) suite.ConformanceOptions {
	crlog.SetLogger(logr.Discard())
	// A scheme of the suite's own: adding the Gateway API types to
	// client-go's shared one would race with sturdy's clients reading it.
	scheme := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha3.Install, v1alpha2.Install, v1beta1.Install, gwv1.Install, apiextensionsv1.AddToScheme} {
		if err := install(scheme); err != nil {
			t.Fatal(err)
		}
	}
	opts := client.Options{Scheme: scheme} // the suite makes more clients with them
	cl, err := client.New(c.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	return suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     className,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			TimeoutConfig:        config.DefaultTimeoutConfig(),
			Mode:                 "default",
			AllowCRDsMismatch:    true,
			ConformanceProfiles:  []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName},
			Implementation: confv1.Implementation{Organization: "sturdyproxy", Project: "sturdy", URL: "https://github.com/sturdyproxy/sturdy",
				Version: "main", Contact: []string{"https://github.com/sturdyproxy/sturdy/issues"}},
		},
		Client:        cl,
		ClientOptions: opts,
		Clientset:     c.Client,
		RestConfig:    c.Config,
		ManifestFS:    []fs.FS{&gwconformance.Manifests},
	}
}

// summarise prints the report's statistics per profile, the tests that
// failed, and the counts; and writes the report: to docs/ with -update,
// else to a temporary file it names.
func summarise(t *testing.T, report *confv1.ConformanceReport, results map[string]string, took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "Gateway API conformance %s (%s channel), %s, in %s\n", report.GatewayAPIVersion, report.GatewayAPIChannel, report.Date, took.Round(time.Second))
	for _, p := range report.ProfileReports {
		fmt.Fprintf(&b, "  %s: %s; core %d passed, %d failed, %d skipped", p.Name, p.Summary, p.Core.Statistics.Passed, p.Core.Statistics.Failed, p.Core.Statistics.Skipped)
		if p.Extended != nil {
			fmt.Fprintf(&b, "; extended %d passed, %d failed, %d skipped", p.Extended.Statistics.Passed, p.Extended.Statistics.Failed, p.Extended.Statistics.Skipped)
		}
		b.WriteString("\n")
	}
	count := map[string]int{}
	var failed []string
	for name, r := range results {
		count[r]++
		if r == "failed" {
			failed = append(failed, name)
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		fmt.Fprintf(&b, "  failed: %s\n", strings.Join(failed, ", "))
	}
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped\n", count["passed"], count["failed"], count["skipped"])
	fmt.Print(b.String())
	raw, err := yaml.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(reportFile))
	if *update {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, reportFile)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if !*update {
		t.Logf("report in %s (-update writes it to %s)", path, reportFile)
	}
}

// buildEcho builds the suite's echo backend, echo-basic, from the
// conformance module sturdy's go.mod names.
func buildEcho(t *testing.T) string {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "echo-basic")
	cmd := exec.Command("go", "build", "-o", out, "sigs.k8s.io/gateway-api/conformance/echo-basic")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build echo-basic: %v\n%s", err, b)
	}
	return out
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the repository")
		}
		dir = parent
	}
}
