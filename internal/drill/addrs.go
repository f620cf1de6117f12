package drill

import (
	"fmt"
	"net"
)

// addrs is one scenario run's loopback address plan. All of 127.0.0.0/8 is
// loopback on Linux, so each run takes its own second octet and each part
// its own address: the proxy's logs, events and hashing then see distinct
// clients and hosts, as they would in production. Ports are picked by the
// kernel.
type addrs struct{ o2 int }

// Roles of the third octet.
const (
	octetBad    = 100 // bad clients: 127.R.100+j.1
	octetMain   = 200 // the incident's pool: 127.R.200.i
	octetMiddle = 201 // the middle tier in front of it (WAFs)
	octetOther  = 202 // a healthy second pool
	octetExtra  = 203 // pools of an operator config the scenario does not use, one octet each
	octetProxy  = 250 // the proxy under test
)

// maxRuns is how many runs get distinct second octets before they repeat
// (which is harmless: ports differ).
const maxRuns = 200

func newAddrs(run int) addrs { return addrs{o2: 10 + run%maxRuns} }

// client is innocent client i. Each client gets its own /24 because
// nginx's ip_hash hashes only the first three octets of an IPv4 address:
// clients in one /24 would all land on one backend.
func (a addrs) client(i int) string { return fmt.Sprintf("127.%d.%d.1", a.o2, 1+i) }

// bad is candidate bad client j; the seed picks which.
func (a addrs) bad(j int) string { return fmt.Sprintf("127.%d.%d.1", a.o2, octetBad+j) }

// host is address i (0-based) in a pool or tier octet.
func (a addrs) host(octet, i int) string { return fmt.Sprintf("127.%d.%d.%d", a.o2, octet, 1+i) }

// proxy is the proxy's listen address.
func (a addrs) proxy() string { return fmt.Sprintf("127.%d.%d.1", a.o2, octetProxy) }

// freePort returns ip:port where nothing listens right now, for a proxy
// that cannot be told to pick its own port (nginx).
func freePort(ip string) (string, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}
