package fake

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a DNS server on a loopback UDP address whose answers change on
// cue: A records for host names, SRV records for service names, or a
// failure (SERVFAIL) for everything, as a resolver under pressure gives.
// Point sturdy's dns.servers at Addr.
type DNS struct {
	Addr    string
	Queries atomic.Int64

	pc   net.PacketConn
	mu   sync.Mutex // guards a, srv, fail
	a    map[string][]netip.Addr
	srv  map[string][]SRV
	fail bool
	wg   sync.WaitGroup
}

// SRV is one SRV record.
type SRV struct {
	Target           string
	Port             uint16
	Priority, Weight uint16
}

// NewDNS listens on ip:0 (UDP) and answers.
func NewDNS(ip string) (*DNS, error) {
	pc, err := net.ListenPacket("udp", ip+":0")
	if err != nil {
		return nil, err
	}
	d := &DNS{Addr: pc.LocalAddr().String(), pc: pc, a: map[string][]netip.Addr{}, srv: map[string][]SRV{}}
	d.wg.Add(1)
	go d.serve()
	return d, nil
}

func fqdn(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) + "." }

// SetA makes name answer with the given IPv4 addresses (none: NXDOMAIN).
func (d *DNS) SetA(name string, ips ...string) {
	var as []netip.Addr
	for _, ip := range ips {
		as = append(as, netip.MustParseAddr(ip))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.a[fqdn(name)] = as
}

// SetSRV makes name answer with the given SRV records.
func (d *DNS) SetSRV(name string, recs ...SRV) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.srv[fqdn(name)] = recs
}

// Fail makes every query fail with SERVFAIL (true) or be answered again.
func (d *DNS) Fail(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = on
}

// Close stops the server.
func (d *DNS) Close() {
	d.pc.Close()
	d.wg.Wait()
}

func (d *DNS) serve() {
	defer d.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := d.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		d.Queries.Add(1)
		if out := d.answer(buf[:n]); out != nil {
			d.pc.WriteTo(out, from)
		}
	}
}

func (d *DNS) answer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil
	}
	question := qs[0]
	name := strings.ToLower(question.Name.String())
	d.mu.Lock()
	fail, as, srvs := d.fail, d.a[name], d.srv[name]
	_, known := d.a[name]
	_, knownSRV := d.srv[name]
	d.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	switch {
	case fail:
		rh.RCode = dnsmessage.RCodeServerFailure
	case !known && !knownSRV || known && len(as) == 0 && question.Type == dnsmessage.TypeA:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(question)
	b.StartAnswers()
	if rh.RCode == dnsmessage.RCodeSuccess {
		rrh := dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 1}
		switch question.Type {
		case dnsmessage.TypeA:
			for _, a := range as {
				b.AResource(rrh, dnsmessage.AResource{A: a.As4()})
			}
		case dnsmessage.TypeSRV:
			for _, s := range srvs {
				b.SRVResource(rrh, dnsmessage.SRVResource{
					Priority: s.Priority, Weight: s.Weight, Port: s.Port,
					Target: dnsmessage.MustNewName(fqdn(s.Target)),
				})
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
