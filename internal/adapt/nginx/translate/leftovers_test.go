package translate

import (
	"strings"
	"testing"
)

// The reasons listed for what was not translated say what sturdy does
// now (it serves files, redirects, rewrites and answers fixed bodies), not
// that it only proxies.
func TestLeftoverReasonsSayWhatSturdyDoes(t *testing.T) {
	res := importCase(t, "upstream app { server 10.0.0.1:8080; }\nfastcgi_param A b;\nserver {\nlisten 80;\nlocation / { proxy_pass http://app; }\n}")
	if len(res.NotTranslated) == 0 {
		t.Fatal("nothing listed as not translated")
	}
	var fastcgi bool
	for _, it := range res.NotTranslated {
		if strings.Contains(it.Reason, "only proxies") {
			t.Errorf("%s: %q says sturdy only proxies", it.Directive, it.Reason)
		}
		if strings.HasPrefix(it.Directive, "fastcgi_param") {
			fastcgi = strings.Contains(it.Reason, "serves files, redirects, rewrites and answers fixed bodies")
		}
	}
	if !fastcgi {
		t.Errorf("fastcgi_param's reason does not say what sturdy does: %+v", res.NotTranslated)
	}
}
