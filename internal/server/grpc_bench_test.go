package server

import (
	"context"
	"io"
	"testing"

	testpb "google.golang.org/grpc/interop/grpc_testing"
)

const grpcBenchConfig = `
admin: { listen: "off" }
listeners: [ { name: grpc, listen: "127.0.0.1:0", h2c: true } ]
routes: [ { name: svc, default: true, pool: svc } ]
pools: [ { name: svc, protocol: h2c, hosts: [ { addr: "{{g1}}" } ] } ]
`

// BenchmarkGRPC compares gRPC calls straight to a grpc-go server with the
// same calls through sturdy (h2c listener, h2c pool), one grpc-go client
// connection each, all on loopback in this process:
//
//	go test -run '^$' -bench BenchmarkGRPC -benchtime 3s ./internal/server
//
// unary is a 1 KiB echo from parallel callers; stream is a
// server-streaming call of 64 messages of 16 KiB (MB/s).
func BenchmarkGRPC(b *testing.B) {
	g1, _ := grpcBackend(b, "127.1.3.1", "g1")
	s, _, _ := startSturdy(b, parseConfig(b, grpcBenchConfig, map[string]string{"g1": g1}))
	for _, target := range []struct{ name, addr string }{{"direct", g1}, {"sturdy", s.Addr("grpc")}} {
		c := testpb.NewTestServiceClient(grpcConn(b, target.addr))
		b.Run("unary/"+target.name, func(b *testing.B) {
			req := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: make([]byte, 1024)}}
			b.SetBytes(1024)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.UnaryCall(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run("stream/"+target.name, func(b *testing.B) {
			params := make([]*testpb.ResponseParameters, 64)
			for i := range params {
				params[i] = &testpb.ResponseParameters{Size: 16 << 10}
			}
			req := &testpb.StreamingOutputCallRequest{ResponseParameters: params}
			b.SetBytes(64 * 16 << 10)
			for b.Loop() {
				st, err := c.StreamingOutputCall(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := st.Recv(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
