package health

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sturdyproxy/sturdy/internal/wire/grpcwire"
)

// The gRPC health checking protocol (grpc.health.v1.Health/Check) as an
// active check, for pools of gRPC servers, which answer no plain HTTP.
// The two messages are tiny, so they are encoded here by hand rather
// than with a protobuf library:
//
//	HealthCheckRequest  { string service = 1; }
//	HealthCheckResponse { ServingStatus status = 1; }  // 1 = SERVING
//
// A host passes when the call ends with grpc-status 0 and the status is
// SERVING; NOT_SERVING, an unknown service (grpc-status 5) or anything
// else fails it, with the reason as the check's detail.

const grpcHealthPath = "/grpc.health.v1.Health/Check"

// grpcServing is HealthCheckResponse.ServingStatus SERVING.
const grpcServing = 1

var grpcStatusNames = map[uint64]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

// grpcHealthRequest is the length-prefixed message of a Check call.
func grpcHealthRequest(service string) []byte {
	var msg []byte
	if service != "" {
		msg = append(msg, 0x0a) // field 1, length-delimited
		msg = binary.AppendUvarint(msg, uint64(len(service)))
		msg = append(msg, service...)
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

// grpcHealthStatus reads the serving status from a Check response body.
func grpcHealthStatus(body []byte) (uint64, error) {
	if len(body) < 5 {
		return 0, fmt.Errorf("the answer holds no gRPC message (%d bytes)", len(body))
	}
	if body[0] != 0 {
		return 0, fmt.Errorf("the answer is compressed; a health check asks for none")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	msg := body[5:]
	if uint32(len(msg)) < n {
		return 0, fmt.Errorf("the gRPC message is cut short")
	}
	msg = msg[:n]
	status := uint64(0) // proto3: an absent field is UNKNOWN
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, fmt.Errorf("the HealthCheckResponse is malformed")
		}
		msg = msg[k:]
		switch key & 7 {
		case 0: // varint
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, fmt.Errorf("the HealthCheckResponse is malformed")
			}
			msg = msg[k:]
			if key>>3 == 1 {
				status = v
			}
		case 2: // length-delimited: skipped
			l, k := binary.Uvarint(msg)
			if k <= 0 || uint64(len(msg)-k) < l {
				return 0, fmt.Errorf("the HealthCheckResponse is malformed")
			}
			msg = msg[k+int(l):]
		default:
			return 0, fmt.Errorf("the HealthCheckResponse has an unexpected field type")
		}
	}
	return status, nil
}

// probeGRPC calls Check on h and judges its answer.
func (c *checker) probeGRPC(ctx context.Context, h *Host) (bool, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.p.Scheme+"://"+h.Target+grpcHealthPath, bytes.NewReader(grpcHealthRequest(c.cfg.GRPCService)))
	if err != nil {
		return false, err.Error(), nil
	}
	req.Header["Content-Type"] = []string{"application/grpc"}
	req.Header["Te"] = []string{"trailers"}
	// The server bounds its own work by the probe's deadline, as it would
	// a caller's: a check that hangs on the server side ends with it.
	if dl, ok := ctx.Deadline(); ok {
		req.Header["Grpc-Timeout"] = []string{grpcwire.FormatTimeout(time.Until(dl))}
	}
	req.Header["User-Agent"] = []string{"sturdy-health-check"}
	if c.cfg.Host != "" {
		req.Host = c.cfg.Host
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false, "request failed: " + shortErr(err), err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Sprintf("HTTP status %d, not a gRPC answer", resp.StatusCode), nil
	}
	code, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if code == "" { // trailers-only: the status came with the headers
		code, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if code != "0" {
		if m, err := url.PathUnescape(msg); err == nil {
			msg = m
		}
		return false, fmt.Sprintf("grpc-status %s %s", code, msg), nil
	}
	st, err := grpcHealthStatus(body)
	if err != nil {
		return false, err.Error(), nil
	}
	name := grpcStatusNames[st]
	if name == "" {
		name = fmt.Sprintf("status %d", st)
	}
	return st == grpcServing, name, nil
}

// probeProtocols are the protocols a pool's probes speak: HTTP/2 for h2
// and h2c pools (gRPC servers speak nothing else), Go's defaults else.
func probeProtocols(protocol string) *http.Protocols {
	var p http.Protocols
	switch protocol {
	case "h2":
		p.SetHTTP2(true)
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	default:
		return nil
	}
	return &p
}
