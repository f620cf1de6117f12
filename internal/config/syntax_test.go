package config

import (
	"errors"
	"strings"
	"testing"
)

// Each syntax mistake is reported on the line that holds it, whatever
// construct it sits in.
var syntaxCases = []struct {
	name string
	yaml string
	line int
	msg  string
}{
	{"bad indent in a list item (the issue's case)", `admin: { listen: 127.0.0.1:9901 }
listeners:
  - name: web
    listen: 127.0.0.1:8080
routes:
  - name: all
   pool: web
pools: []
`, 7, "did not find expected '-' indicator"},
	{"list item where a key belongs", `listeners:
  - { name: web, listen: 127.0.0.1:8080 }
pools:
  - name: web
    hosts:
      - addr: 127.0.0.1:9001
    - addr: 127.0.0.1:9002
`, 7, "did not find expected key"},
	{"unclosed flow sequence", `listeners:
  - { name: web, listen: 127.0.0.1:8080 }
routes:
  - { name: all, pool: web, hosts: [a.example, b.example }
pools: []
`, 4, "did not find expected ',' or ']'"},
	{"unclosed flow mapping", `listeners:
  - { name: web, listen: 127.0.0.1:8080 }
routes:
  - { name: all, pool: web
pools: []
`, 4, "did not find expected ',' or '}'"},
	{"tab used for indentation", "listeners:\n  - name: web\n\tlisten: 127.0.0.1:8080\n", 3, "found a tab character that violates indentation"},
	{"unterminated quoted string", `listeners:
  - name: web
    listen: "127.0.0.1:8080
routes: []
`, 3, "found unexpected end of stream"},
	{"a value after a value", `listeners:
  - name: web
    listen: 127.0.0.1:8080
routes:
  - name: all pool: web
`, 5, "mapping values are not allowed in this context"},
	{"character that cannot start a token", "listeners:\n  - name: @web\n", 2, "found character that cannot start any token"},
	{"unknown alias", "listeners:\n  - name: web\n    listen: 127.0.0.1:8080\nroutes:\n  - { name: all, pool: *web }\n", 5, "unknown anchor 'web' referenced"},
	{"mistake at the end, blank lines after", "listeners:\n  - { name: web, listen: [127.0.0.1:8080\n\n\n", 2, "did not find expected ',' or ']'"},
}

func TestSyntaxErrorsNameTheLineOfTheMistake(t *testing.T) {
	for _, tc := range syntaxCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "s.yaml")
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("got %v; want one syntax error", err)
			}
			e := list[0]
			if e.Line != tc.line || !strings.Contains(e.Msg, tc.msg) || !strings.HasPrefix(e.Msg, "YAML syntax: ") {
				t.Errorf("got %s\nwant s.yaml:%d: YAML syntax: %s", e.Error(), tc.line, tc.msg)
			}
		})
	}
}
