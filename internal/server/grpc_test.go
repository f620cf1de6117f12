package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// testService is a grpc-go TestService: it echoes, streams, fails with
// the status a request asks for, and reports the deadline it was given.
type testService struct {
	testpb.UnimplementedTestServiceServer
	name string
}

func (s *testService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md := metadata.Pairs("x-backend", s.name)
	if dl, ok := ctx.Deadline(); ok {
		md.Append("x-deadline-ms", strconv.FormatInt(time.Until(dl).Milliseconds(), 10))
	}
	grpc.SetHeader(ctx, md)
	grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "after the body"))
	if st := in.GetResponseStatus(); st != nil && st.Code != 0 {
		return nil, status.Error(codes.Code(st.Code), st.Message)
	}
	if string(in.GetPayload().GetBody()) == "sleep" {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &testpb.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (s *testService) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	for _, p := range in.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	if st := in.GetResponseStatus(); st != nil && st.Code != 0 {
		return status.Error(codes.Code(st.Code), st.Message) // in the trailers, after the messages
	}
	return nil
}

func (s *testService) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	n := 0
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(n)})
		}
		if err != nil {
			return err
		}
		n += len(m.GetPayload().GetBody())
	}
}

func (s *testService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: m.GetPayload()}); err != nil {
			return err
		}
	}
}

// grpcBackend serves the test service and grpc.health.v1 (h2c) on ip.
func grpcBackend(t testing.TB, ip, name string) (string, *grpchealth.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &testService{name: name})
	hs := grpchealth.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), hs
}

func grpcConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

const grpcConfig = `
admin: { listen: "off" }
listeners: [ { name: grpc, listen: "127.0.0.1:0", h2c: true } ]
routes:
  - { name: short, path: /grpc.testing.TestService/UnaryCall, pool: svc, timeouts: { total: 300ms, connect: 100ms }, hosts: [short] }
  - { name: svc, default: true, pool: svc }
pools:
  - name: svc
    protocol: h2c
    hosts: [ { addr: "{{g1}}" } ]
    health: { passive: { window: 10s, min_requests: 1000 } }
`

// answered is how many answers route has finished: counted after its
// attempts were settled, so that a test waits on it rather than a pause.
func answered(s *Server, route string) uint64 {
	var v view.Route
	s.Runtime().Route(route).Stats.View(&v)
	var n uint64
	for _, c := range v.Requests {
		n += c
	}
	return n
}

// waitAnswered waits until route has finished more than before answers;
// 5s is a generous bound, not a threshold.
func waitAnswered(t *testing.T, s *Server, route string, before uint64) {
	t.Helper()
	if !testutil.Eventually(5*time.Second, func() bool { return answered(s, route) > before }) {
		t.Fatalf("route %s did not finish the request within 5s", route)
	}
}

func attempts(s *Server, pool string, c outcome.Class) uint64 {
	var n uint64
	for _, h := range s.Runtime().Pool(pool).Hosts {
		n += h.Attempts(c)
	}
	return n
}

// Unary, server-streaming, client-streaming and bidirectional calls pass
// through sturdy (h2c listener, h2c pool) with their headers, messages,
// trailers and statuses.
func TestGRPCCallsThroughSturdy(t *testing.T) {
	t.Parallel()
	g1, _ := grpcBackend(t, "127.1.0.1", "g1")
	s, _, _ := startSturdy(t, parseConfig(t, grpcConfig, map[string]string{"g1": g1}))
	c := testpb.NewTestServiceClient(grpcConn(t, s.Addr("grpc")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var hdr, tr metadata.MD
	resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("ping")}}, grpc.Header(&hdr), grpc.Trailer(&tr))
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.GetPayload().GetBody()) != "ping" || first(hdr, "x-backend") != "g1" || first(tr, "x-trailer") != "after the body" {
		t.Errorf("unary: %q, header %v, trailer %v", resp.GetPayload().GetBody(), hdr, tr)
	}

	out, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 10}, {Size: 20}, {Size: 30000}}})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for {
		m, err := out.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(m.GetPayload().GetBody()))
	}
	if fmt.Sprint(sizes) != "[10 20 30000]" {
		t.Errorf("server streaming: %v", sizes)
	}

	in, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 40000} {
		if err := in.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := in.CloseAndRecv()
	if err != nil || sum.GetAggregatedPayloadSize() != 40006 {
		t.Errorf("client streaming: %v, %v", sum, err)
	}

	bidi, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // one at a time: each answer must arrive before the next message is sent
		msg := fmt.Sprintf("m%d", i)
		if err := bidi.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte(msg)}}); err != nil {
			t.Fatal(err)
		}
		m, err := bidi.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != msg {
			t.Fatalf("bidi %d: %q, %v", i, m.GetPayload().GetBody(), err)
		}
	}
	bidi.CloseSend()
	if _, err := bidi.Recv(); err != io.EOF {
		t.Errorf("bidi end: %v", err)
	}
	if n := attempts(s, "svc", outcome.OK); n != 4 {
		t.Errorf("%d successful attempts recorded, want 4 (one per call, streams when they end)", n)
	}
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// gRPC statuses are outcomes: UNAVAILABLE counts like a 503 (trailers-only
// or in the trailers after messages), DEADLINE_EXCEEDED like a timeout,
// and the caller's own errors are never charged to the backend.
func TestGRPCStatusesAsOutcomes(t *testing.T) {
	t.Parallel()
	g1, _ := grpcBackend(t, "127.1.0.2", "g1")
	s, _, _ := startSturdy(t, parseConfig(t, grpcConfig, map[string]string{"g1": g1}))
	c := testpb.NewTestServiceClient(grpcConn(t, s.Addr("grpc")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unary := func(code codes.Code) error {
		_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(code), Message: "asked for " + code.String()}})
		return err
	}
	for _, code := range []codes.Code{codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.AlreadyExists} {
		if err := unary(code); status.Code(err) != code {
			t.Errorf("asked for %s, got %v", code, err)
		}
	}
	if n := attempts(s, "svc", outcome.Status5xx) + attempts(s, "svc", outcome.ResponseTimeout); n != 0 {
		t.Errorf("the caller's own errors charged %d failures to the backend", n)
	}
	if n := attempts(s, "svc", outcome.OK); n != 6 {
		t.Errorf("%d attempts recorded as answered, want 6", n)
	}

	if err := unary(codes.Unavailable); status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "asked for Unavailable") {
		t.Errorf("the backend's own UNAVAILABLE did not reach the caller: %v", err)
	}
	if n := attempts(s, "svc", outcome.Status5xx); n != 1 {
		t.Errorf("trailers-only UNAVAILABLE: %d status_5xx attempts, want 1", n)
	}
	out, _ := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
		ResponseParameters: []*testpb.ResponseParameters{{Size: 5}},
		ResponseStatus:     &testpb.EchoStatus{Code: int32(codes.Unavailable), Message: "after one message"},
	})
	if _, err := out.Recv(); err != nil {
		t.Fatalf("first message: %v", err)
	}
	if _, err := out.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("status after the messages: %v", err)
	}
	if !testutil.Eventually(2*time.Second, func() bool { return attempts(s, "svc", outcome.Status5xx) == 2 }) {
		t.Errorf("not so: %s", "UNAVAILABLE in the trailers after a message counted against the backend")
	}
	if err := unary(codes.DeadlineExceeded); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("DEADLINE_EXCEEDED: %v", err)
	}
	if n := attempts(s, "svc", outcome.ResponseTimeout); n != 1 {
		t.Errorf("the backend's DEADLINE_EXCEEDED: %d response_timeout attempts, want 1", n)
	}
}

// grpc-timeout is the call's deadline, capped by the route's total
// timeout, and the backend is told the deadline that applies; a call
// whose own deadline passes gets DEADLINE_EXCEEDED and charges nobody.
func TestGRPCDeadlines(t *testing.T) {
	t.Parallel()
	g1, _ := grpcBackend(t, "127.1.0.3", "g1")
	s, _, _ := startSturdy(t, parseConfig(t, grpcConfig, map[string]string{"g1": g1}))
	cc := grpcConn(t, s.Addr("grpc"))
	c := testpb.NewTestServiceClient(cc)
	deadlineSeen := func(authority string, d time.Duration) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		var hdr metadata.MD
		opts := []grpc.CallOption{grpc.Header(&hdr)}
		if authority != "" {
			opts = append(opts, grpc.CallAuthority(authority))
		}
		if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, opts...); err != nil {
			t.Fatal(err)
		}
		ms, err := strconv.Atoi(first(hdr, "x-deadline-ms"))
		if err != nil {
			t.Fatalf("the backend saw no deadline: %v", hdr)
		}
		return ms
	}
	if ms := deadlineSeen("", 5*time.Second); ms < 4000 || ms > 5000 {
		t.Errorf("grpc-timeout 5s: the backend's deadline is %dms away", ms)
	}
	if ms := deadlineSeen("short", 5*time.Second); ms > 300 {
		t.Errorf("a route with total 300ms: the backend's deadline is %dms away; want at most 300", ms)
	}
	// The route's deadline passes: sturdy answers DEADLINE_EXCEEDED.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("sleep")}}, grpc.CallAuthority("short"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("route deadline: %v", err)
	}
	// The caller's deadline passes: DEADLINE_EXCEEDED, charged to nobody.
	before, done := attempts(s, "svc", outcome.ResponseTimeout), answered(s, "svc")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = c.UnaryCall(ctx2, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("sleep")}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("caller deadline: %v", err)
	}
	waitAnswered(t, s, "svc", done) // sturdy finishes the call it was handed
	if n := attempts(s, "svc", outcome.ResponseTimeout) - before; n != 0 {
		t.Errorf("the caller's own deadline charged %d response timeouts to the backend", n)
	}
}

const grpcEmptyConfig = `
admin: { listen: "off" }
listeners: [ { name: grpc, listen: "127.0.0.1:0", h2c: true } ]
routes:
  - { name: svc, default: true, pool: svc, sorry: { retry_after: 7s } }
pools: [ { name: svc, protocol: h2c, hosts: [ { addr: "{{dead}}" } ] } ]
`

// An empty pool answers a gRPC call the gRPC way: trailers-only,
// grpc-status 14 (UNAVAILABLE), a grpc-message and a retry pushback, not
// an HTML sorry page.
func TestGRPCEmptyPoolAnswer(t *testing.T) {
	t.Parallel()
	s, _, _ := startSturdy(t, parseConfig(t, grpcEmptyConfig, map[string]string{"dead": deadAddr(t)}))
	c := testpb.NewTestServiceClient(grpcConn(t, s.Addr("grpc")))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), `route "svc"`) {
		t.Errorf("grpc-go client got %v; want UNAVAILABLE naming the route", err)
	}
	// On the wire: HTTP 200, one HEADERS frame, no body.
	req, _ := http.NewRequest("POST", "http://"+s.Addr("grpc")+"/grpc.testing.TestService/UnaryCall", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Grpc-Status") != "14" || h.Get("Grpc-Retry-Pushback-Ms") != "7000" ||
		h.Get("Content-Type") != "application/grpc" || h.Get("Retry-After") != "" || len(body) != 0 || len(resp.Trailer) != 0 {
		t.Errorf("answer: %d %v, body %q, trailer %v; want trailers-only 200 with grpc-status 14 and pushback 7000ms", resp.StatusCode, h, body, resp.Trailer)
	}
	if m := h.Get("Grpc-Message"); !strings.Contains(m, "no backend can answer") {
		t.Errorf("grpc-message %q", m)
	}
}

const grpcCheckConfig = `
admin: { listen: "off" }
listeners: [ { name: grpc, listen: "127.0.0.1:0", h2c: true } ]
routes: [ { name: svc, default: true, pool: svc } ]
pools:
  - name: svc
    protocol: h2c
    hosts: [ { addr: "{{g1}}" }, { addr: "{{g2}}" } ]
    health: { active: { type: grpc, grpc_service: grpc.testing.TestService, interval: 300ms, fast_interval: 100ms, timeout: 250ms, rise: 1, fall: 2, jitter: 1ms } }
`

// grpc.health.v1 as the active check: a server that reports NOT_SERVING
// for the service goes down, and comes back when it serves again.
func TestGRPCHealthCheck(t *testing.T) {
	t.Parallel()
	g1, h1 := grpcBackend(t, "127.1.0.4", "g1")
	g2, h2 := grpcBackend(t, "127.1.0.5", "g2")
	for _, hs := range []*grpchealth.Server{h1, h2} {
		hs.SetServingStatus("grpc.testing.TestService", healthpb.HealthCheckResponse_SERVING)
	}
	s, _, _ := startSturdy(t, parseConfig(t, grpcCheckConfig, map[string]string{"g1": g1, "g2": g2}))
	hosts := s.Runtime().Pool("svc").Hosts
	h2.SetServingStatus("grpc.testing.TestService", healthpb.HealthCheckResponse_NOT_SERVING)
	if !testutil.Eventually(5*time.Second, func() bool { return hosts[1].Mode() == health.Down }) {
		t.Errorf("not so: %s", "NOT_SERVING took the host down")
	}
	if hosts[0].Mode() != health.Healthy {
		t.Errorf("the serving host is %s", hosts[0].Mode())
	}
	if !testutil.Eventually(5*time.Second, func() bool { return strings.Contains(hosts[1].LastCheck().Detail, "NOT_SERVING") }) {
		t.Errorf("check detail %q; want NOT_SERVING", hosts[1].LastCheck().Detail)
	}
	c := testpb.NewTestServiceClient(grpcConn(t, s.Addr("grpc")))
	for range 4 {
		var hdr metadata.MD
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Header(&hdr)); err != nil || first(hdr, "x-backend") != "g1" {
			t.Errorf("with g2 down: %v from %v", err, hdr)
		}
	}
	h2.SetServingStatus("grpc.testing.TestService", healthpb.HealthCheckResponse_SERVING)
	if !testutil.Eventually(5*time.Second, func() bool { return hosts[1].Mode() == health.Healthy }) {
		t.Errorf("not so: %s", "SERVING brought the host back")
	}
	// A server shutting down reports NOT_SERVING for everything.
	h1.Shutdown()
	if !testutil.Eventually(5*time.Second, func() bool { return hosts[0].Mode() == health.Down }) {
		t.Errorf("not so: %s", "a health server that went NOT_SERVING on shutdown")
	}
}

const grpcTLSConfig = `
admin: { listen: "off" }
listeners: [ { name: grpcs, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" } } ]
routes: [ { name: svc, default: true, pool: svc } ]
pools:
  - name: svc
    protocol: h2
    tls: { ca: "{{ca}}", server_name: backend }
    hosts: [ { addr: "{{g1}}" } ]
    health: { active: { type: grpc, interval: 300ms, fast_interval: 100ms, timeout: 250ms, rise: 1, fall: 2, jitter: 1ms } }
`

// gRPC over TLS end to end: a grpc-go client over TLS to sturdy's TLS
// listener (ALPN h2), sturdy over TLS to a grpc-go server (pool protocol
// h2), with the health check over the same TLS.
func TestGRPCOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "grpc CA")
	ln, err := net.Listen("tcp", "127.1.0.6:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.TLS(t, testpki.Leaf{DNS: []string{"backend"}})}})))
	testpb.RegisterTestServiceServer(srv, &testService{name: "g-tls"})
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}})
	s, _, _ := startSturdy(t, parseConfig(t, grpcTLSConfig, map[string]string{
		"cert": cert, "key": key, "ca": ca.WriteCA(t, dir, "ca"), "g1": ln.Addr().String(),
	}))
	cc, err := grpc.NewClient("passthrough:///"+s.Addr("grpcs"), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "x"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var hdr, tr metadata.MD
	resp, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("over tls")}}, grpc.Header(&hdr), grpc.Trailer(&tr))
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.GetPayload().GetBody()) != "over tls" || first(hdr, "x-backend") != "g-tls" || first(tr, "x-trailer") != "after the body" {
		t.Errorf("unary over TLS: %q, header %v, trailer %v", resp.GetPayload().GetBody(), hdr, tr)
	}
	h := s.Runtime().Pool("svc").Hosts[0]
	if !testutil.Eventually(3*time.Second, func() bool { return h.LastCheck().OK }) {
		t.Errorf("the grpc.health.v1 check over TLS: %+v", h.LastCheck())
	}
}

// A streaming call whose caller's deadline passes while the backend is
// still sending its messages ends there, and is the caller's giving up,
// charged to no backend: sturdy's own timer for the deadline may end the
// read from the backend before the caller's cancel arrives (or from a
// caller that does not cancel, as here).
func TestGRPCCallerDeadlineMidStreamChargesNoHost(t *testing.T) {
	t.Parallel()
	g, _ := h2cBackend(t, "127.1.0.4", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		msg := []byte{0, 0, 0, 0, 2, 0x0a, 0}
		for range 40 {
			if _, err := w.Write(msg); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		w.Header().Set("Grpc-Status", "0")
	}))
	s, _, _ := startSturdy(t, parseConfig(t, grpcConfig, map[string]string{"g1": g}))
	req, _ := http.NewRequest("POST", "http://"+s.Addr("grpc")+"/grpc.testing.TestService/StreamingOutputCall", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	req.Header.Set("Grpc-Timeout", "300m")
	done := answered(s, "svc")
	resp, err := h2cClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // cut at the deadline
	resp.Body.Close()
	waitAnswered(t, s, "svc", done)
	if n := attempts(s, "svc", outcome.BodyError); n != 0 {
		t.Fatalf("the caller's deadline, passed mid-stream, charged %d body errors to the backend", n)
	}
}

// A gRPC probe carries its timeout as grpc-timeout, so that the server
// bounds its own work by it as it would a caller's deadline.
func TestGRPCHealthCheckCarriesItsTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.1.0.6:0")
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan time.Duration, 16)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod == "/grpc.health.v1.Health/Check" {
			d := time.Duration(-1) // no deadline
			if dl, ok := ctx.Deadline(); ok {
				d = time.Until(dl)
			}
			select {
			case left <- d:
			default:
			}
		}
		return handler(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: grpc, listen: "127.0.0.1:0", h2c: true } ]
routes: [ { name: svc, default: true, pool: svc } ]
pools:
  - name: svc
    protocol: h2c
    hosts: [ { addr: "{{g}}" } ]
    health: { active: { type: grpc, interval: 3s, timeout: 2s, rise: 1, fall: 2, jitter: 1ms } }
`, map[string]string{"g": ln.Addr().String()}))
	select {
	case d := <-left:
		if d <= 0 || d > 2*time.Second {
			t.Errorf("the probe's deadline at the server: %v left; want a grpc-timeout of at most the check's 2s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no probe reached the server in 10s")
	}
}

// A gRPC call that lands on a route whose pools speak HTTP/1.1 is answered
// UNIMPLEMENTED at once, with the reason, and reaches no backend: gRPC
// needs HTTP/2 end to end, and the call would otherwise hang until its
// deadline on a backend that cannot answer it.
func TestGRPCOnAnHTTP1RouteIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	web := recordingBackend(t, "127.1.0.7", "web")
	s, _, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: grpc, listen: "127.0.0.1:0", h2c: true } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{w}}" } ] } ]
`, map[string]string{"w": web.addr()}))
	c := testpb.NewTestServiceClient(grpcConn(t, s.Addr("grpc")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// sturdy's own answer (the message says why), and no backend saw
	// the call: it did not wait on one, whatever the machine's speed.
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "HTTP/1.1") {
		t.Fatalf("the call ended %v; want UNIMPLEMENTED saying the pools speak HTTP/1.1", err)
	}
	if n := web.count(); n != 0 {
		t.Errorf("the HTTP/1.1 backend received %d requests", n)
	}
}
