// Package basicauth checks HTTP Basic credentials against an htpasswd file
// (nginx's auth_basic and auth_basic_user_file). Compile reads the file,
// so it is re-read on every reload; a file with a line sturdy cannot use
// is a load error naming the line, never a half-working list.
//
// bcrypt costs milliseconds by design; paying it per request would make
// every protected request slow and hand attackers a CPU lever. So verified
// credentials are remembered in a small bounded cache, keyed by a keyed
// hash of user and password (never the password itself) and tied to the
// stored hash they were checked against, so that a changed or removed user
// is checked afresh. Failures are rate limited per client: once a client
// has spent its burst of failures it gets 429 with Retry-After, without
// its guesses being checked at all.
package basicauth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// CacheSize is how many verified credentials are remembered per route.
const CacheSize = 1024

// failureTableSize bounds the clients whose failures are remembered.
const failureTableSize = 16384

// Auth is one route's compiled basic_auth. Safe for concurrent use.
type Auth struct {
	cfg   config.BasicAuth
	users map[string]user
	// decoy is the file's first user: an unknown user's password is
	// checked against it (and refused whatever the result), so that a
	// wrong user name takes as long as a wrong password.
	decoy     user
	challenge string
	cache     *cache
	failures  *ratelimit.Table
	C         *Counters
}

type user struct {
	hash   string
	scheme scheme
}

// Counters count one route's outcomes since start; they survive reloads.
type Counters struct {
	OK       atomic.Uint64 // accepted (CacheHits of them without hashing)
	CacheHit atomic.Uint64
	Failed   atomic.Uint64 // 401: missing or wrong credentials
	Blocked  atomic.Uint64 // 429: too many failures from the client
}

// Compile reads cfg's htpasswd file through read (os.ReadFile, or the
// compile's own reads). path names the key in errors
// ("routes[2].basic_auth"). prev, the same route's Auth of the previous
// config (or nil), hands over its cache, failure counts and counters: a
// cached credential is only used while its user's stored hash is
// unchanged.
func Compile(path string, cfg *config.BasicAuth, prev *Auth, read func(string) ([]byte, error)) (*Auth, error) {
	if cfg == nil {
		return nil, nil
	}
	users, first, err := readFile(read, cfg.Htpasswd)
	if err != nil {
		return nil, fmt.Errorf("%s.htpasswd: %v", path, err)
	}
	realm := cfg.Realm
	if realm == "" {
		realm = config.DefaultBasicAuthRealm
	}
	rate := cfg.FailureRate
	if !rate.Set() {
		rate = config.DefaultAuthFailureRate
	}
	if cfg.FailureBurst < 0 {
		return nil, fmt.Errorf("%s.failure_burst: must not be negative", path)
	}
	a := &Auth{cfg: *cfg, users: users, decoy: users[first], challenge: `Basic realm="` + realm + `", charset="UTF-8"`}
	a.cfg.FailureRate = rate
	if a.cfg.FailureBurst == 0 {
		a.cfg.FailureBurst = config.DefaultAuthFailureBurst
	}
	if prev != nil {
		a.cache, a.C = prev.cache, prev.C
		if prev.cfg.FailureRate == rate {
			a.failures = prev.failures
		}
	}
	if a.cache == nil {
		a.cache = newCache(CacheSize)
	}
	if a.C == nil {
		a.C = new(Counters)
	}
	if a.failures == nil {
		a.failures = ratelimit.NewTable(failureTableSize, rate.Interval())
	}
	return a, nil
}

// readFile reads an htpasswd file: user:hash lines, # comments, blank
// lines ignored. It also returns the first user's name. Errors name the
// file and line.
func readFile(read func(string) ([]byte, error), name string) (users map[string]user, first string, err error) {
	b, err := read(name)
	if err != nil {
		return nil, "", fmt.Errorf("cannot read the password file: %v", err)
	}
	users = map[string]user{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || line[0] == '#' {
			continue
		}
		login, hash, ok := strings.Cut(line, ":")
		if !ok || login == "" {
			return nil, "", fmt.Errorf("%s:%d: expected user:hash", name, n)
		}
		// Apache's htdigest files and some tools add fields after the hash.
		hash, _, _ = strings.Cut(hash, ":")
		s, err := schemeOf(hash)
		if err != nil {
			return nil, "", fmt.Errorf("%s:%d: user %q: %v", name, n, login, err)
		}
		if _, dup := users[login]; dup {
			return nil, "", fmt.Errorf("%s:%d: user %q is listed twice", name, n, login)
		}
		users[login] = user{hash: hash, scheme: s}
		if first == "" {
			first = login
		}
	}
	if len(users) == 0 {
		return nil, "", fmt.Errorf("%s: no users; add one with htpasswd -B %s USER", name, name)
	}
	return users, first, nil
}

// Users is how many users the file lists.
func (a *Auth) Users() int { return len(a.users) }

// Result is the verdict on a request's credentials.
type Result struct {
	// User is the authenticated user ("" when refused).
	User string
	// Status is 0 when accepted, 401 for missing or wrong credentials,
	// 429 when the client has failed too often.
	Status int
	// RetryAfter is set with 429.
	RetryAfter time.Duration
}

// Check verifies r's Basic credentials. client is the client's address as
// the proxy decided it, the key failures are counted under; now comes from
// the process's clock.
func (a *Auth) Check(r *http.Request, client string, now time.Time) Result {
	// The failure bucket's burst is FailureBurst-1: its first request is
	// free, so after FailureBurst failures in a row the next attempt is
	// refused.
	burst := a.cfg.FailureBurst - 1
	if client != "" {
		if blocked, wait := a.failures.Blocked(client, now, burst); blocked {
			a.C.Blocked.Add(1)
			return Result{Status: http.StatusTooManyRequests, RetryAfter: wait}
		}
	}
	name, password, ok := r.BasicAuth()
	if ok && a.verify(name, password) {
		a.C.OK.Add(1)
		return Result{User: name}
	}
	a.C.Failed.Add(1)
	if ok && client != "" { // a request without credentials is not a guess
		a.failures.Take(client, now, burst, -1)
	}
	return Result{Status: http.StatusUnauthorized}
}

func (a *Auth) verify(name, password string) bool {
	u, known := a.users[name]
	if !known {
		verify(a.decoy.scheme, a.decoy.hash, password)
		return false
	}
	k := a.cache.key(name, password)
	if a.cache.has(k, u.hash) {
		a.C.CacheHit.Add(1)
		return true
	}
	if !verify(u.scheme, u.hash, password) {
		return false
	}
	a.cache.add(k, u.hash)
	return true
}

// Challenge is the WWW-Authenticate value of a 401.
func (a *Auth) Challenge() string { return a.challenge }

// ForwardAuthorization reports whether the client's Authorization header
// may go to the backends (basic_auth.forward_authorization).
func (a *Auth) ForwardAuthorization() bool { return a.cfg.ForwardAuthorization }

// cache remembers verified credentials. Entries are keyed by SHA-256 of a
// random secret, the user and the password: the map never holds anything
// from which a password could be recovered faster than from the htpasswd
// file, and every entry names the stored hash it was verified against.
type cache struct {
	secret [32]byte
	mu     sync.Mutex // guards m
	m      map[[32]byte]string
	max    int
}

func newCache(n int) *cache {
	c := &cache{m: make(map[[32]byte]string, n), max: n}
	rand.Read(c.secret[:])
	return c
}

func (c *cache) key(name, password string) [32]byte {
	h := sha256.New()
	h.Write(c.secret[:])
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(password))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *cache) has(k [32]byte, hash string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[k]
	return ok && h == hash
}

func (c *cache) add(k [32]byte, hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for old := range c.m { // map order is random: a random victim
			delete(c.m, old)
			break
		}
	}
	c.m[k] = hash
}
