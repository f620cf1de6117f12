// Command load drives the benchmark's TLS-handshake and gRPC cells, which
// wrk and h2load do not cover, and makes their certificate and gRPC origin.
//
//	load gencert DIR                       ECDSA P-256 cert.pem and key.pem for 127.0.0.1
//	load grpc-origin -listen ADDR          a grpc-go server: grpc.testing.TestService
//	load handshake -addr A -c N -d 5s [-resume]
//	load grpc-unary -addr A -c N -d 5s
//	load grpc-stream -addr A -c N -d 5s
//
// The load modes print one line as `bench/report wrk` does:
// "requests rps p50_us p99_us errors". A handshake is a new TLS 1.3
// connection (X25519 key exchange, the certificate not verified: the
// client's checks are not the proxy's cost) carrying one
// `GET /1k` with `Connection: close`, read to the end so that the
// server's session tickets arrive; with -resume every connection offers
// the ticket of an earlier one, and a connection that was not resumed
// counts as an error. A grpc-unary request is a 1 KiB UnaryCall echo; a
// grpc-stream request is one StreamingOutputCall of 64 messages of
// 16 KiB (1 MiB). Every mode stops after -d, and gives up on a call after
// 5 s.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: load gencert DIR | grpc-origin -listen ADDR | handshake|grpc-unary|grpc-stream -addr ADDR -c N -d DURATION")
		os.Exit(2)
	}
	var err error
	switch mode, args := os.Args[1], os.Args[2:]; mode {
	case "gencert":
		if len(args) != 1 {
			err = errors.New("gencert wants one directory")
			break
		}
		err = genCert(args[0])
	case "grpc-origin":
		fs := flag.NewFlagSet(mode, flag.ExitOnError)
		listen := fs.String("listen", "127.0.0.1:18090", "address to listen on (loopback only)")
		fs.Parse(args)
		err = grpcOrigin(*listen)
	case "handshake", "grpc-unary", "grpc-stream":
		fs := flag.NewFlagSet(mode, flag.ExitOnError)
		addr := fs.String("addr", "", "host:port to load")
		conc := fs.Int("c", 1, "concurrent callers")
		dur := fs.Duration("d", 5*time.Second, "how long to run")
		resume := fs.Bool("resume", false, "handshake: resume sessions from tickets")
		fs.Parse(args)
		if *addr == "" || *conc < 1 || *conc > 1024 || *dur <= 0 || *dur > 10*time.Minute {
			err = errors.New("want -addr, -c 1..1024 and -d up to 10m")
			break
		}
		var call func(context.Context) error
		var cleanup func()
		switch mode {
		case "handshake":
			call = handshaker(*addr, *resume)
			if *resume {
				// One unmeasured full handshake fills the session cache.
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := call(ctx); err != nil && !errors.Is(err, errNotResumed) {
					cancel()
					fmt.Fprintln(os.Stderr, "load: priming the session cache:", err)
					os.Exit(1)
				}
				cancel()
			}
		default:
			call, cleanup, err = grpcCaller(*addr, mode == "grpc-stream")
		}
		if err == nil {
			run(call, *conc, *dur)
			if cleanup != nil {
				cleanup()
			}
		}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// run calls call from conc goroutines until d has passed and prints
// "requests rps p50_us p99_us errors".
func run(call func(context.Context) error, conc int, d time.Duration) {
	var (
		mu   sync.Mutex
		lats []time.Duration
		errs int
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				t0 := time.Now()
				err := call(ctx)
				cancel()
				if err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lats)
	q := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		return float64(lats[int(p*float64(len(lats)-1))]) / 1e3
	}
	fmt.Printf("%d %.1f %.0f %.0f %d\n", len(lats), float64(len(lats))/el.Seconds(), q(0.5), q(0.99), errs)
}

var errNotResumed = errors.New("the server did not resume the session")

var request = []byte("GET /1k HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")

func handshaker(addr string, resume bool) func(context.Context) error {
	cfg := &tls.Config{
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
		// X25519 alone: what nginx's OpenSSL and Go's server both pick
		// first among classic groups (Go's client would otherwise also
		// offer X25519MLKEM768, which only the Go servers take).
		CurvePreferences: []tls.CurveID{tls.X25519},
		NextProtos:       []string{"http/1.1"},
	}
	if resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1024)
	}
	return func(ctx context.Context) error {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		dl, _ := ctx.Deadline()
		raw.SetDeadline(dl)
		c := tls.Client(raw, cfg)
		defer c.Close()
		if err := c.HandshakeContext(ctx); err != nil {
			return err
		}
		if _, err := c.Write(request); err != nil {
			return err
		}
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if len(line) < 12 || line[9:12] != "200" {
			return fmt.Errorf("status line %q", line)
		}
		if _, err := io.Copy(io.Discard, br); err != nil {
			return err
		}
		if resume && !c.ConnectionState().DidResume {
			return errNotResumed
		}
		return nil
	}
}

func grpcCaller(addr string, stream bool) (func(context.Context) error, func(), error) {
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	c := testpb.NewTestServiceClient(cc)
	if !stream {
		req := &testpb.SimpleRequest{ResponseSize: 1024, Payload: &testpb.Payload{Body: make([]byte, 1024)}}
		return func(ctx context.Context) error {
			_, err := c.UnaryCall(ctx, req)
			return err
		}, func() { cc.Close() }, nil
	}
	params := make([]*testpb.ResponseParameters, 64)
	for i := range params {
		params[i] = &testpb.ResponseParameters{Size: 16 << 10}
	}
	req := &testpb.StreamingOutputCallRequest{ResponseParameters: params}
	return func(ctx context.Context) error {
		st, err := c.StreamingOutputCall(ctx, req)
		if err != nil {
			return err
		}
		n := 0
		for {
			_, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			n++
		}
		if n != len(params) {
			return fmt.Errorf("%d messages, want %d", n, len(params))
		}
		return nil
	}, func() { cc.Close() }, nil
}

// testService answers UnaryCall with a payload of the size asked for and
// StreamingOutputCall with the messages asked for, from one shared zero
// buffer: the origin's cost is the same for every proxy.
type testService struct {
	testpb.UnimplementedTestServiceServer
	zeros []byte
}

func (s *testService) payload(n int32) *testpb.Payload {
	if n < 0 || int(n) > len(s.zeros) {
		n = 0
	}
	return &testpb.Payload{Body: s.zeros[:n]}
}

func (s *testService) UnaryCall(_ context.Context, r *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return &testpb.SimpleResponse{Payload: s.payload(r.GetResponseSize())}, nil
}

func (s *testService) StreamingOutputCall(r *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	for _, p := range r.GetResponseParameters() {
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: s.payload(p.GetSize())}); err != nil {
			return err
		}
	}
	return nil
}

func grpcOrigin(listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &testService{zeros: make([]byte, 1<<20)})
	return srv.Serve(ln) // until the benchmark stops this process
}

func genCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sturdy-bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o644)
}
