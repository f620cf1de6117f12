package translate

import (
	"strings"
	"testing"
)

// A variable that only other locations set is empty where requests come
// straight in: nginx declares it for the whole configuration.
func TestVariableSetElsewhereIsEmpty(t *testing.T) {
	const up = "upstream app { server 10.0.0.1:8080; }\n"
	res := importCase(t, up+"server {\nlisten 80;\nlocation = /chat { proxy_pass http://app/chat?room=$room&$args; }\nlocation ~ ^/r/(\\w+)/chat$ { set $room $1; rewrite ^ /chat last; }\n}")
	b := block(t, res, 5)
	if b.Status != Translated {
		t.Errorf("status %q, want %q: %s", b.Status, Translated, b.String())
	}
	for _, want := range []string{"rewrite: {path: /chat, query: 'room=&${args}'}", "rewrite: {path: /chat, query: 'room=${1}&${args}'}"} {
		if !hasRoute(res, want) {
			t.Errorf("the YAML lacks %q:\n%s", want, res.YAML)
		}
	}

	// A set on the request's own way (here in an if of its location)
	// gives it a value sturdy does not know: still listed.
	res = importCase(t, up+"server {\nlisten 80;\nlocation = /chat { if ($http_x_room) { set $room $http_x_room; } proxy_pass http://app/chat?room=$room; }\n}")
	b = block(t, res, 5)
	if b.Status != NotTranslated || !strings.Contains(strings.Join(b.Reasons, "\n"), "no value for $room") {
		t.Errorf("status %q, want %q with the reason: %s", b.Status, NotTranslated, b.String())
	}
}
