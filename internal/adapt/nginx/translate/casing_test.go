package translate

import (
	"strings"
	"testing"
)

// nginx lowercases server names when it reads them: $server_name, and a
// redirect built from it, carry the lowercased name, and routes match it.
func TestServerNameCase(t *testing.T) {
	const up = "upstream app { server 10.0.0.1:8080; }\n"
	res := importCase(t, up+"server {\nlisten 80 default_server;\nserver_name Shop.Example;\nreturn 301 https://$server_name$request_uri;\n}\nserver {\nlisten 443 ssl;\nserver_name Shop.Example;\nssl_certificate c.pem;\nssl_certificate_key k.pem;\nlocation / { proxy_set_header X-Name $server_name; proxy_pass http://app; }\n}")
	y := string(res.YAML)
	for _, want := range []string{"redirect: {url: 'https://shop.example${request_uri}', status: 301}", "X-Name: shop.example"} {
		if !strings.Contains(y, want) {
			t.Errorf("the YAML lacks %q:\n%s", want, y)
		}
	}
	if strings.Contains(y, "Shop.Example") {
		t.Errorf("the YAML keeps the name's capitals, which nginx dropped:\n%s", y)
	}
}
