package acme

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// pebble is Let's Encrypt's test CA (Debian package pebble), run by the
// test on loopback with its challenge ports pointed at the test's
// listeners, and pebble-challtestsrv from the same package as its DNS
// server, answering 127.0.0.1 for every name.
type pebble struct {
	directory string         // the ACME directory URL
	caRoot    string         // the file of the CA that signs pebble's own HTTPS certificate
	apiRoots  *x509.CertPool // the same, as a pool
	issuer    *x509.CertPool // pebble's issuing root: verifies what it issues
	mgmt      string         // the management interface's base URL
	client    *http.Client   // trusts pebble's API certificate
}

// get reads a path of pebble's management interface (roots, keys).
func (p *pebble) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := p.client.Get(p.mgmt + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("pebble %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

type pebbleOpts struct {
	httpPort, tlsPort int
	validity          time.Duration // of issued certificates; 0: pebble's default
	ocsp              string        // the OCSP responder URL put in certificates; "": none
}

func needPebble(t *testing.T) (string, string) {
	t.Helper()
	p, err := exec.LookPath("pebble")
	if err != nil {
		t.Skip("pebble not installed: apt-get install -y pebble (Let's Encrypt's test CA; .ci/run installs it)")
	}
	dns, err := exec.LookPath("pebble-challtestsrv")
	if err != nil {
		t.Skip("pebble-challtestsrv not installed (it comes with Debian's pebble package)")
	}
	return p, dns
}

func startPebble(t *testing.T, o pebbleOpts) *pebble {
	t.Helper()
	bin, dnsBin := needPebble(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "pebble API CA")
	cert, key := ca.Write(t, dir, "pebble", testpki.Leaf{DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	dnsPort, acmePort, mgmtPort, challMgmt := freePort(t), freePort(t), freePort(t), freePort(t)

	run(t, dnsBin, nil, "-dns01", fmt.Sprintf("127.0.0.1:%d", dnsPort), "-http01", "", "-https01", "", "-tlsalpn01", "",
		"-management", fmt.Sprintf("127.0.0.1:%d", challMgmt), "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")

	conf := map[string]any{"pebble": map[string]any{
		"listenAddress":                  fmt.Sprintf("127.0.0.1:%d", acmePort),
		"managementListenAddress":        fmt.Sprintf("127.0.0.1:%d", mgmtPort),
		"certificate":                    cert,
		"privateKey":                     key,
		"httpPort":                       o.httpPort,
		"tlsPort":                        o.tlsPort,
		"ocspResponderURL":               o.ocsp,
		"externalAccountBindingRequired": false,
		"certificateValidityPeriod":      int(o.validity / time.Second),
	}}
	b, _ := json.Marshal(conf)
	confFile := filepath.Join(dir, "pebble.json")
	os.WriteFile(confFile, b, 0o644)
	run(t, bin, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"},
		"-config", confFile, "-dnsserver", fmt.Sprintf("127.0.0.1:%d", dnsPort))

	p := &pebble{
		directory: fmt.Sprintf("https://127.0.0.1:%d/dir", acmePort),
		caRoot:    ca.WriteCA(t, dir, "pebble-api-ca.pem"),
		apiRoots:  ca.Pool(),
	}
	cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	p.mgmt, p.client = fmt.Sprintf("https://127.0.0.1:%d", mgmtPort), cl
	var body []byte
	var err error
	if !testutil.Eventually(15*time.Second, func() bool {
		var resp *http.Response
		if resp, err = cl.Get(p.mgmt + "/roots/0"); err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == 200
	}) {
		t.Fatalf("pebble did not start within 15s: %v", err)
	}
	p.issuer = x509.NewCertPool()
	if !p.issuer.AppendCertsFromPEM(body) {
		t.Fatalf("pebble's root is not PEM: %q", body)
	}
	return p
}

// run starts a process for the test's lifetime and stops it by its PID.
func run(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
}

// freePort returns a loopback port free for both TCP and UDP right now.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}
