package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

func TestObservabilityDefaults(t *testing.T) {
	c, err := Parse([]byte(`
admin: { listen: "0.0.0.0:9901", token: 0123456789abcdef, ready_routes: [ site ] }
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] } ]
webhooks:
  - { name: ops, url: "http://127.0.0.1:9/hook" }
  - { name: am, url: "https://am.example/api/v2/alerts", format: alertmanager, timeout: 2s, events: [ pool_empty, pool_restored ] }
`), "inline")
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.AggregateInterval.D() != DefaultAggregateInterval {
		t.Errorf("aggregate interval %v", c.Log.AggregateInterval)
	}
	if w := c.Webhooks[0]; w.Format != WebhookJSON || w.Timeout.D() != DefaultWebhookTimeout {
		t.Errorf("webhook defaults: %+v", w)
	}
	if w := c.Webhooks[1]; w.Format != WebhookAlertmanager || w.Timeout.D().Seconds() != 2 {
		t.Errorf("webhook values: %+v", w)
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true, "localhost": true, "LOCALHOST": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "admin.internal": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// EventTypes must name every event type package event defines, or a valid
// webhook filter would be refused.
func TestEventTypesListsEveryEventConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../event/event.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || g.Doc == nil || g.Doc.Text() != "Types of events. Each names a transition; most come in pairs.\n" {
			continue
		}
		for _, s := range g.Specs {
			for _, v := range s.(*ast.ValueSpec).Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					name, _ := strconv.Unquote(lit.Value)
					found = append(found, name)
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatal("found no event type constants in ../event/event.go; did its comment change?")
	}
	for _, name := range found {
		if !slices.Contains(EventTypes(), name) {
			t.Errorf("event type %q is missing from config.EventTypes", name)
		}
	}
	if len(found) != len(EventTypes()) {
		t.Errorf("event package has %d types, EventTypes %d", len(found), len(EventTypes()))
	}
}
