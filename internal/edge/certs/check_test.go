package certs

import (
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

func TestCheckWarnings(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	now := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	v := map[string]string{}
	v["ok"], v["okk"] = ca.Write(t, dir, "ok", testpki.Leaf{DNS: []string{"shop.test"}, NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(0, 2, 0)})
	v["old"], v["oldk"] = ca.Write(t, dir, "old", testpki.Leaf{DNS: []string{"old.test"}, NotBefore: now.AddDate(-1, 0, 0), NotAfter: now.AddDate(0, 0, -3)})
	v["soon"], v["soonk"] = ca.Write(t, dir, "soon", testpki.Leaf{DNS: []string{"soon.test"}, NotBefore: now.AddDate(0, -2, 0), NotAfter: now.AddDate(0, 0, 10)})
	// A 6-day certificate 3 days before its end is not "expiring soon";
	// one day before it is (a third of its life).
	v["short"], v["shortk"] = ca.Write(t, dir, "short", testpki.Leaf{DNS: []string{"short.test"}, NotBefore: now.AddDate(0, 0, -3), NotAfter: now.AddDate(0, 0, 3)})
	v["stray"], v["strayk"] = ca.Write(t, dir, "stray", testpki.Leaf{DNS: []string{"nobody.test"}})
	v["wild"], v["wildk"] = ca.Write(t, dir, "wild", testpki.Leaf{DNS: []string{"*.api.test"}})
	c := parse(t, `
listeners:
  - name: https
    listen: 127.0.0.1:0
    tls:
      certificates:
        - { cert: "{{ok}}", key: "{{okk}}" }
        - { cert: "{{old}}", key: "{{oldk}}" }
        - { cert: "{{soon}}", key: "{{soonk}}" }
        - { cert: "{{short}}", key: "{{shortk}}" }
        - { cert: "{{stray}}", key: "{{strayk}}" }
        - { cert: "{{wild}}", key: "{{wildk}}", names: [ "*.api.test", "extra.test" ] }
  - { name: plain, listen: 127.0.0.1:0 }
routes:
  - { name: shop, hosts: [ shop.test, old.test, soon.test, short.test, blog.test ], pool: web }
  - { name: api, hosts: [ "*.api.test", "*.cdn.test" ], pool: web }
  - { name: other, listeners: [ plain ], default: true, pool: web }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`, v)
	got := Warnings(c, compile(t, c), now)
	want := []string{
		"test.yaml:8: listeners[0].tls.certificates[1]: " + v["old"] + " expired on 2027-02-26; clients refuse it: replace it",
		"test.yaml:9: listeners[0].tls.certificates[2]: " + v["soon"] + " expires in 10d (on 2027-03-11); check warns 23d ahead: renew it",
		"test.yaml:12: listeners[0].tls.certificates[5].names[1]: extra.test is not among the names of " + v["wild"] + " ([*.api.test]); clients asking for it will reject the certificate",
		"test.yaml:15: routes[0].hosts[4]: no certificate of listener https covers blog.test; clients get the default certificate " + v["ok"] + " and a name mismatch",
		"test.yaml:16: routes[1].hosts[1]: no certificate of listener https covers *.cdn.test; clients get the default certificate " + v["ok"] + " and a name mismatch",
		"test.yaml:11: listeners[0].tls.certificates[4]: no route on listener https serves any of [nobody.test] (the names of " + v["stray"] + "); check the routes' hosts or remove the certificate",
	}
	var lines []string
	for _, w := range got {
		lines = append(lines, w.Error())
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	ex := Expiries(compile(t, c))
	if len(ex) != 6 || ex[1].Listener != "https" || ex[1].Names[0] != "old.test" || !ex[1].NotAfter.Equal(now.AddDate(0, 0, -3)) {
		t.Errorf("expiries: %+v", ex)
	}

	// One day before the end of the 6-day certificate, it is expiring.
	got = Warnings(c, compile(t, c), now.AddDate(0, 0, 2).Add(time.Hour))
	found := false
	for _, w := range got {
		found = found || strings.Contains(w.Error(), v["short"]+" expires in 23h0m0s")
	}
	if !found {
		t.Errorf("short certificate one day before its end not reported: %v", got)
	}
}

func TestCheckWarnsAboutUnverifiableRequirement(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	cert, key := ca.Write(t, dir, "site", testpki.Leaf{DNS: []string{"site.test"}})
	c := parse(t, `
listeners:
  - { name: http, listen: 127.0.0.1:0, redirect_https: {} }
  - { name: https, listen: 127.0.0.1:0, tls: { cert: "{{c}}", key: "{{k}}", client_auth: { mode: verify_if_given, ca: "{{ca}}" } } }
  - { name: open, listen: 127.0.0.1:0, tls: { cert: "{{c}}", key: "{{k}}" } }
routes:
  - { name: site, default: true, pool: web }
  - { name: admin, path: /admin/, pool: web, client_cert: required }
  - { name: ops, path: /ops/, pool: web, client_cert: required, listeners: [ https ] }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`, map[string]string{"c": cert, "k": key, "ca": ca.WriteCA(t, dir, "ca.pem")})
	got := Warnings(c, compile(t, c), time.Now())
	if len(got) != 1 || got[0].Path != "routes[1].client_cert" || !strings.Contains(got[0].Msg, "listener open does not verify") {
		t.Errorf("warnings: %v", got)
	}
}
