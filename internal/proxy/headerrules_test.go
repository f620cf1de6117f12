package proxy

import (
	"net/http"
	"slices"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// A value that expands to nothing sets no header, as nginx passes none
// whose value is empty: set removes what the client sent under the name,
// add adds nothing; a value with text is set or added.
func TestHeaderRulesEmptyValue(t *testing.T) {
	tmpl := func(s string) *subst.Template {
		tm, err := subst.Parse(s, subst.Options{Context: subst.Header})
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	hr := HeaderRules{
		Set: []HeaderValue{NewHeaderValue("X-Session", tmpl("$cookie_session")), NewHeaderValue("X-Fixed", tmpl("1"))},
		Add: []HeaderValue{NewHeaderValue("X-Agent", tmpl("$http_user_agent")), NewHeaderValue("X-Tag", tmpl("t"))},
	}
	for _, tc := range []struct {
		cookie, agent string
		session       []string
		agents        []string
	}{
		{"", "", nil, []string{"old"}},
		{"session=s3", "curl", []string{"s3"}, []string{"old", "curl"}},
	} {
		r, _ := http.NewRequest("GET", "http://h/", nil)
		if tc.cookie != "" {
			r.Header.Set("Cookie", tc.cookie)
		}
		r.Header.Set("User-Agent", tc.agent)
		h := http.Header{"X-Session": {"forged"}, "X-Agent": {"old"}}
		hr.Apply(h, &subst.Vars{R: r})
		if !slices.Equal(h["X-Session"], tc.session) || !slices.Equal(h["X-Agent"], tc.agents) || h.Get("X-Fixed") != "1" || h.Get("X-Tag") != "t" {
			t.Errorf("cookie %q, agent %q: headers %v; want X-Session %v, X-Agent %v", tc.cookie, tc.agent, h, tc.session, tc.agents)
		}
	}
}
