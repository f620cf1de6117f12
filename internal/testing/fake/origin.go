package fake

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Headers an Origin stamps on every successful answer, so that a client
// behind a cache can tell, without trusting the cache, whether an answer is
// a copy (a serial it has seen before) and how old it really is.
const (
	// OriginSerialHeader is unique per answer the origin generated.
	OriginSerialHeader = "X-Origin-Serial"
	// OriginBornHeader is when the origin generated the answer, in Unix
	// nanoseconds.
	OriginBornHeader = "X-Origin-Born"
)

// ProbeUserAgent is the User-Agent of sturdy's active checks. An Origin does
// not count probes among the errors it served: they never reach a client.
const ProbeUserAgent = "sturdy-health-check"

// Origin is a cache-friendly HTTP backend for incident 004: its successful
// answers carry a Cache-Control header (e.g. "max-age=1,
// stale-if-error=86400"), a serial and a birth time; on cue it answers every
// request with an error status instead, as a half-deployed application
// instance does.
type Origin struct {
	Name string
	Addr string

	cacheControl string
	failing      atomic.Int32 // status to answer with; 0 means healthy
	failEvery    atomic.Int32 // when > 1, only every Nth answer fails
	n            atomic.Int64 // answers, for failEvery
	serial       atomic.Uint64
	served       atomic.Int64
	errors       atomic.Int64

	srv *http.Server
	wg  sync.WaitGroup
}

// NewOrigin listens on ip:0 and serves.
func NewOrigin(name, ip, cacheControl string) (*Origin, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	o := &Origin{Name: name, Addr: ln.Addr().String(), cacheControl: cacheControl}
	o.srv = &http.Server{Handler: o, ReadHeaderTimeout: 5 * time.Second}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		o.srv.Serve(ln)
	}()
	return o, nil
}

// Fail makes the origin answer status (e.g. 502) from now on; 0 heals it.
// every > 1 fails only every Nth answer, for a one-host pool that must
// still fail a share of its requests.
func (o *Origin) Fail(status, every int) {
	o.failEvery.Store(int32(every))
	o.failing.Store(int32(status))
}

// Served returns how many requests it answered, probes excluded.
func (o *Origin) Served() int64 { return o.served.Load() }

// Errors returns how many of those got an error status.
func (o *Origin) Errors() int64 { return o.errors.Load() }

func (o *Origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	probe := r.Header.Get("User-Agent") == ProbeUserAgent
	if !probe {
		o.served.Add(1)
	}
	n := o.n.Add(1)
	if st := int(o.failing.Load()); st != 0 {
		if every := int64(o.failEvery.Load()); every <= 1 || n%every == 0 {
			if !probe {
				o.errors.Add(1)
			}
			// A broken instance says nothing about caching: no
			// Cache-Control on errors.
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(st)
			fmt.Fprintf(w, "%d from %s\n", st, o.Name)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain")
	h.Set("Cache-Control", o.cacheControl)
	h.Set(OriginSerialHeader, o.Name+"-"+strconv.FormatUint(o.serial.Add(1), 10))
	h.Set(OriginBornHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	fmt.Fprintf(w, "page %s from %s\n", r.URL.Path, o.Name)
}

// Close stops the origin.
func (o *Origin) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if o.srv.Shutdown(ctx) != nil {
		o.srv.Close()
	}
	o.wg.Wait()
}
