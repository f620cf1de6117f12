package config

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// keyPaths lists every key a config file may hold, as dotted paths from
// the top ("routes.timeouts.connect"): the fields of the structs the
// decoder fills, through slices, maps and pointers.
func keyPaths(t reflect.Type, prefix string, seen map[reflect.Type]bool, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for name, i := range yamlFields(t) {
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		*out = append(*out, p)
		keyPaths(t.Field(i).Type, p, seen, out)
	}
}

// The reference names every key of the config: docs/config.md, or a page
// of docs/ it links to for a section's details (access.md for access
// controls, observability.md for webhooks), names each key in backticks,
// alone or as the last part of a dotted path. A key added to the structs
// without a word in the reference fails here.
func TestConfigReferenceNamesEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, m := range regexp.MustCompile(`\]\(([a-z0-9-]+\.md)`).FindAllStringSubmatch(string(doc), -1) {
		if more, err := os.ReadFile("../../docs/" + m[1]); err == nil {
			text += string(more)
		}
	}
	text = strings.ReplaceAll(text, "[]", "") // `webhooks[]` names webhooks
	var paths []string
	keyPaths(reflect.TypeOf(Config{}), "", map[reflect.Type]bool{}, &paths)
	sort.Strings(paths)
	if len(paths) < 100 {
		t.Fatalf("found only %d keys; is the walk wrong?", len(paths))
	}
	var missing []string
	for _, p := range paths {
		parts := strings.Split(p, ".")
		leaf := parts[len(parts)-1]
		parent := ""
		if len(parts) > 1 {
			parent = parts[len(parts)-2]
		}
		if !strings.Contains(text, "`"+leaf+"`") && !strings.Contains(text, "."+leaf+"`") &&
			!strings.Contains(text, "`"+leaf+":") && !strings.Contains(text, "`"+parent+"."+leaf) &&
			!strings.Contains(text, "."+leaf+".") && !strings.Contains(text, "`"+leaf+".") {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/config.md does not name %d keys:\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
}
