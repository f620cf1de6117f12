package basicauth

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

var passwords = map[string]string{
	"alice": "wonder land", "bob": "builder", "carol": "c4r0l", "dave": "dave pass",
	"eve": "eve", "frank": "frank", "grace": "not secret",
	"heidi": "Hello world!", "ivan": "Hello world!",
}

// The test vectors of Drepper's SHA-crypt specification, with rounds.
func TestSHACryptVectors(t *testing.T) {
	for _, tc := range []struct{ setting, password, want string }{
		{"$5$saltstring", "Hello world!", "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"},
		{"$5$rounds=10000$saltstringsaltstring", "Hello world!", "$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA"},
		{"$5$rounds=10$roundstoolow", "the minimum number is still observed", "$5$rounds=1000$roundstoolow$yfvwcWrQ8l/K0DAWyuPMDNHpIVlTQebY9l/gL972bIC"},
		{"$6$saltstring", "Hello world!", "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"},
		{"$6$rounds=10000$saltstringsaltstring", "Hello world!", "$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v."},
		{"$6$rounds=1400$anotherlongsaltstring", "a very much longer text to encrypt.  This one even stretches over morethan one line.", "$6$rounds=1400$anotherlongsalts$POfYwTEok97VWcjxIiSOjiykti.o/pQs.wPvMxQ6Fm7I6IoYN3CmLs66x9t0oSwbtEW7o7UmJEiDwGqd8p4ur1"},
	} {
		if got := shaCrypt(tc.password, tc.setting); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.setting, got, tc.want)
		}
	}
}

func compile(t *testing.T, file string, prev *Auth) *Auth {
	t.Helper()
	a, err := Compile("routes[0].basic_auth", &config.BasicAuth{Htpasswd: file, Realm: "staff", FailureRate: config.Rate{N: 1, Per: time.Minute}, FailureBurst: 2}, prev, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func withAuth(user, password string) *http.Request {
	r, _ := http.NewRequest("GET", "http://example.com/", nil)
	if user != "" {
		r.SetBasicAuth(user, password)
	}
	return r
}

// Every form real files hold, as Debian's htpasswd and openssl write them.
func TestEverySupportedFormatVerifies(t *testing.T) {
	a := compile(t, "testdata/users.htpasswd", nil)
	if a.Users() != len(passwords) {
		t.Fatalf("%d users, want %d", a.Users(), len(passwords))
	}
	for u, p := range passwords {
		if !a.verify(u, p) {
			t.Errorf("%s: the right password was refused", u)
		}
		if a.verify(u, p+"x") || a.verify(u, "") {
			t.Errorf("%s: a wrong password was accepted", u)
		}
	}
	if a.verify("mallory", "x") {
		t.Error("an unknown user was accepted")
	}
}

// An unknown user is refused even with the password of the user whose
// hash it is checked against (the decoy, the file's first user).
func TestUnknownUserWithTheDecoysPasswordIsRefused(t *testing.T) {
	a := compile(t, "testdata/users.htpasswd", nil)
	if a.decoy.hash != a.users["alice"].hash {
		t.Fatal("the decoy is the file's first user")
	}
	if a.verify("mallory", passwords["alice"]) {
		t.Fatal("accepted")
	}
}

// Hashes written by the openssl on this machine, when it is installed.
func TestHashesWrittenByOpenssl(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed; the fixtures in testdata cover its formats")
	}
	for _, flag := range []string{"-1", "-apr1", "-5", "-6"} {
		out, err := exec.Command(bin, "passwd", flag, "pass word "+flag).Output()
		if err != nil {
			t.Fatalf("openssl passwd %s: %v", flag, err)
		}
		h := strings.TrimSpace(string(out))
		s, err := schemeOf(h)
		if err != nil || !verify(s, h, "pass word "+flag) || verify(s, h, "pass word") {
			t.Errorf("openssl passwd %s: %s: wrong verdict (%v)", flag, h, err)
		}
	}
}

// Files written by the htpasswd on this machine, when it is installed.
func TestFilesWrittenByHtpasswd(t *testing.T) {
	bin, err := exec.LookPath("htpasswd")
	if err != nil {
		t.Skip("htpasswd not installed (apt-get install -y apache2-utils); the fixtures in testdata cover its formats")
	}
	file := filepath.Join(t.TempDir(), "htpasswd")
	for i, flag := range []string{"-B", "-m", "-s"} {
		args := []string{"-b", flag, file, "u" + flag, "pw" + flag}
		if i == 0 {
			args = append([]string{"-c"}, args...)
		}
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("htpasswd %v: %v\n%s", args, err, out)
		}
	}
	a := compile(t, file, nil)
	for _, flag := range []string{"-B", "-m", "-s"} {
		if !a.verify("u"+flag, "pw"+flag) || a.verify("u"+flag, "pw") {
			t.Errorf("htpasswd %s: wrong verdict", flag)
		}
	}
}

func TestUnusableFilesAreLoadErrorsNamingTheLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"a:$2y$05$6KfVJl2.i/7wZw8Ey8a59Oy8H2RU4aPVlb2pMcT5j3dpbwkEFKYp.\ngina:3vFtjoRF3lp0A\n", `:2: user "gina": DES crypt (htpasswd -d) is not supported`},
		{"# only\n\nsam:$y$j9T$Fq3.dNV1sBfOqvV0lHz.1/$ZpCB0y8AcSIpjKEY4HMeTaJeQ6trZ4dK5kkFBqLXsW2\n", `:3: user "sam": yescrypt and scrypt are not supported; regenerate with htpasswd -B`},
		{"nocolon\n", ":1: expected user:hash"},
		{"a:{PLAIN}x\na:{PLAIN}y\n", `:2: user "a" is listed twice`},
		{"a:{SHA}short\n", `:1: user "a": malformed {SHA} hash`},
		{"# nobody\n", ": no users; add one with htpasswd -B"},
	} {
		f := filepath.Join(dir, "f")
		os.WriteFile(f, []byte(tc.body), 0o600)
		_, err := Compile("routes[4].basic_auth", &config.BasicAuth{Htpasswd: f}, nil, os.ReadFile)
		if err == nil || !strings.HasPrefix(err.Error(), "routes[4].basic_auth.htpasswd: "+f) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.body, err, tc.want)
		}
	}
	_, err := Compile("routes[4].basic_auth", &config.BasicAuth{Htpasswd: filepath.Join(dir, "missing")}, nil, os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "cannot read the password file") {
		t.Errorf("missing file: %v", err)
	}
}

// bcrypt is paid once per credential, not per request; a changed hash in
// the reloaded file is checked afresh, so the old password stops working.
func TestVerifiedCredentialsAreCachedUntilTheFileChanges(t *testing.T) {
	file := filepath.Join(t.TempDir(), "htpasswd")
	os.WriteFile(file, []byte("alice:$2y$05$6KfVJl2.i/7wZw8Ey8a59Oy8H2RU4aPVlb2pMcT5j3dpbwkEFKYp.\n"), 0o600)
	a := compile(t, file, nil)
	for range 3 {
		if res := a.Check(withAuth("alice", "wonder land"), "192.0.2.1", time.Now()); res.Status != 0 || res.User != "alice" {
			t.Fatalf("result %+v", res)
		}
	}
	if a.C.OK.Load() != 3 || a.C.CacheHit.Load() != 2 {
		t.Fatalf("ok %d, cache hits %d; want 3 and 2", a.C.OK.Load(), a.C.CacheHit.Load())
	}
	os.WriteFile(file, []byte("alice:{PLAIN}new password\n"), 0o600)
	b := compile(t, file, a)
	if res := b.Check(withAuth("alice", "wonder land"), "192.0.2.1", time.Now()); res.Status != http.StatusUnauthorized {
		t.Fatalf("old password after the file changed: %+v, want 401", res)
	}
	if res := b.Check(withAuth("alice", "new password"), "192.0.2.1", time.Now()); res.Status != 0 {
		t.Fatalf("new password: %+v", res)
	}
	if b.C != a.C {
		t.Fatal("counters must carry over a reload")
	}
}

// A client that keeps failing is refused without its guesses being
// checked; other clients are not affected; the block ends at the rate.
func TestFailuresAreRateLimitedPerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := compile(t, "testdata/users.htpasswd", nil) // 1r/m, burst 2
		bad, good := "192.0.2.66", "192.0.2.7"
		var got []int
		for range 5 {
			got = append(got, a.Check(withAuth("bob", "guess"), bad, time.Now()).Status)
		}
		if want := []int{401, 401, 429, 429, 429}; !equal(got, want) { // two failures allowed
			t.Fatalf("statuses %v, want %v", got, want)
		}
		res := a.Check(withAuth("bob", "builder"), bad, time.Now())
		if res.Status != 429 || res.RetryAfter <= 0 || res.RetryAfter > time.Minute {
			t.Fatalf("blocked client with the right password: %+v, want 429 with a Retry-After up to 1m", res)
		}
		if res := a.Check(withAuth("bob", "builder"), good, time.Now()); res.Status != 0 {
			t.Fatalf("another client: %+v", res)
		}
		for range 3 { // no credentials: a 401 challenge, not a guess
			a.Check(withAuth("", ""), good, time.Now())
		}
		if res := a.Check(withAuth("bob", "builder"), good, time.Now()); res.Status != 0 {
			t.Fatalf("challenges counted as failures: %+v", res)
		}
		time.Sleep(res.RetryAfter)
		if res := a.Check(withAuth("bob", "builder"), bad, time.Now()); res.Status != 0 {
			t.Fatalf("after Retry-After: %+v", res)
		}
		if a.C.Blocked.Load() != 4 {
			t.Fatalf("blocked %d, want 4", a.C.Blocked.Load())
		}
	})
}

func TestChallengeNamesTheRealm(t *testing.T) {
	a := compile(t, "testdata/users.htpasswd", nil)
	if a.Challenge() != `Basic realm="staff", charset="UTF-8"` || a.ForwardAuthorization() {
		t.Fatalf("challenge %q, forward %v", a.Challenge(), a.ForwardAuthorization())
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A cached credential costs a hash of the key, not bcrypt:
//
//	go test -run '^$' -bench . -benchmem ./internal/access/basicauth
func BenchmarkCheckCached(b *testing.B) {
	a, _ := Compile("b", &config.BasicAuth{Htpasswd: "testdata/users.htpasswd"}, nil, os.ReadFile)
	r := withAuth("alice", "wonder land")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		a.Check(r, "192.0.2.1", now)
	}
}

func BenchmarkCheckUncachedBcryptCost5(b *testing.B) {
	a, _ := Compile("b", &config.BasicAuth{Htpasswd: "testdata/users.htpasswd"}, nil, os.ReadFile)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		a.cache = newCache(1)
		a.Check(withAuth("alice", "wonder land"), "192.0.2.1", now)
	}
}
