// Package nginxtest runs Debian's nginx for tests: it finds the binary,
// rewrites a parsed configuration so that every path points into a temp
// directory and every listen and upstream address onto loopback, and checks
// or starts nginx with the result. It is used by tests only; nothing in the
// sturdy binary imports it.
package nginxtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binary returns the path of the nginx binary, or "" when none is
// installed (tests then skip, saying `apt-get install -y nginx-light`).
func Binary() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	const debian = "/usr/sbin/nginx"
	if _, err := os.Stat(debian); err == nil {
		return debian
	}
	return ""
}

// SkipMessage is what tests say when nginx is missing.
const SkipMessage = "nginx is not installed; apt-get install -y nginx-light (or nginx) to run this test"

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WriteRSACert writes a self-signed RSA certificate and its key as PEM
// files into dir and returns their paths (for Plan.RSACert).
func WriteRSACert(dir string) (cert, key string, err error) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	return writeCert(dir, "test-rsa", priv, &priv.PublicKey)
}

// WriteCert writes a self-signed ECDSA certificate and its key as PEM files
// into dir and returns their paths. Clients in the tests skip verification:
// what is compared is the answer, not the certificate.
func WriteCert(dir string) (cert, key string, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	return writeCert(dir, "test", priv, &priv.PublicKey)
}

// writeCert self-signs pub with priv and writes NAME-cert.pem and
// NAME-key.pem (PKCS #8) into dir.
func writeCert(dir, name string, priv crypto.Signer, pub any) (cert, key string, err error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "nginxtest"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o644); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

// Check runs `nginx -t` on file with prefix dir and returns nil when nginx
// accepts it, else an error holding nginx's own message.
func Check(ctx context.Context, bin, dir, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-t", "-q", "-p", dir+"/", "-c", file, "-e", filepath.Join(dir, "startup.log"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s", firstEmerg(out))
	}
	return nil
}

// firstEmerg returns nginx's first [emerg] message without its timestamp
// and pid, and without the prefix directory, so that it is stable.
func firstEmerg(out []byte) string {
	for _, line := range strings.Split(string(out), "\n") {
		if _, msg, ok := strings.Cut(line, "[emerg] "); ok {
			// "12345#12345: message": drop the process and thread ids.
			if id, rest, ok := strings.Cut(msg, ": "); ok && strings.Trim(id, "0123456789#") == "" {
				msg = rest
			}
			return strings.TrimSpace(msg)
		}
	}
	if _, msg, ok := strings.Cut(string(out), "nginx: [emerg] "); ok {
		msg, _, _ = strings.Cut(msg, "\n")
		return msg
	}
	return strings.TrimSpace(string(out))
}

// Proc is a running nginx.
type Proc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer // written by exec until the process exits
	exited chan struct{}
	dir    string
}

// Start runs nginx in the foreground with prefix dir and waits until every
// address in wait accepts connections.
func Start(ctx context.Context, bin, dir, file string, wait []string) (*Proc, error) {
	p := &Proc{exited: make(chan struct{}), dir: dir}
	p.cmd = exec.Command(bin, "-p", dir+"/", "-c", file, "-e", filepath.Join(dir, "startup.log"), "-g", "daemon off; master_process on;")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	// Its own process group, so that its workers can be stopped with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	if err := WaitListening(ctx, wait, p.exited); err != nil {
		p.Stop()
		b, _ := os.ReadFile(filepath.Join(dir, "startup.log"))
		return nil, fmt.Errorf("nginx: %v: %s%s", err, p.out.String(), firstEmerg(b))
	}
	return p, nil
}

// Stop ends nginx (SIGTERM to its process group, whose id is the master's
// PID; SIGKILL after 5s) and waits for it.
func (p *Proc) Stop() {
	pid := p.cmd.Process.Pid
	syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		<-p.exited
	}
}

// WaitListening polls until every address accepts a TCP connection, the
// process exits (exited closes) or 10 seconds pass.
func WaitListening(ctx context.Context, addrs []string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				return errors.New("exited at start")
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not accept connections within 10s", a)
			}
		}
	}
	return nil
}

// User is the user directive a root master needs so that its workers can
// read the temp directory: Debian's www-data when it exists, else nobody.
// It is "" when the tests do not run as root (nginx then keeps the user).
func User() string {
	if os.Geteuid() != 0 {
		return ""
	}
	if b, err := os.ReadFile("/etc/passwd"); err == nil && bytes.Contains(b, []byte("\nwww-data:")) {
		return "www-data www-data"
	}
	return "nobody nogroup"
}
