package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The YAML library parses; this file maps its node tree onto the config
// structs. yaml.v3's own strict mode (KnownFields) reports unknown keys by
// line only and with Go type names; operators need the key path
// ("routes[1].timeouts.conect"), the keys that were expected, and every
// error of a file at once, so the mapping is done here, by reflection over
// the `yaml` struct tags.

// scalar is implemented by config types that decode themselves from one
// YAML scalar (durations, sizes). The message of a returned error should say
// what was expected.
type scalar interface {
	decodeScalar(s string) error
}

type decoder struct {
	file  string
	errs  ErrorList
	lines map[string]int // key path -> line, for validation messages
	// structural is set when a list or a mapping could not be decoded at
	// all: what is below it is missing, and judging the rest would report
	// errors that are not there.
	structural bool
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, Error{File: d.file, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

var scalarType = reflect.TypeFor[scalar]()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if path != "" {
		d.lines[path] = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value keeps the default
	}
	if v.CanAddr() && v.Addr().Type().Implements(scalarType) {
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected a single value, got %s", kindName(n))
			return
		}
		if err := v.Addr().Interface().(scalar).decodeScalar(n.Value); err != nil {
			d.errorf(n, path, "%v", err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list, got %s", kindName(n))
			d.structural = true
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected a string, got %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int:
		i, err := strconv.Atoi(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errorf(n, path, "expected a whole number, got %s", describe(n))
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		b, ok := parseBool(n.Value)
		if n.Kind != yaml.ScalarNode || !ok {
			d.errorf(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	default:
		panic("config: no decoder for " + v.Type().String())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of keys, got %s", describe(n))
		d.structural = true
		return
	}
	fields := yamlFields(v.Type())
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		kp := key
		if path != "" {
			kp = path + "." + key
		}
		idx, ok := fields[key]
		if !ok {
			keys := sortedKeys(fields)
			d.errorf(k, kp, "unknown key; %sexpected one of: %s", didYouMean(key, keys), strings.Join(keys, ", "))
			continue
		}
		if seen[key] {
			d.errorf(k, kp, "key given twice; keep one")
			continue
		}
		seen[key] = true
		d.decode(val, v.Field(idx), kp)
	}
}

// decodeMap decodes a mapping with string keys that the config does not
// know in advance (header names). Key paths are "path.KEY".
func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping of names to values, got %s", describe(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		if m.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
			d.errorf(k, kp, "key given twice; keep one")
			continue
		}
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, e, kp)
		m.SetMapIndex(reflect.ValueOf(k.Value), e)
	}
	v.Set(m)
}

// yamlFields maps yaml keys to field indexes; fields tagged "-" are skipped.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		m[tag] = i
	}
	return m
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return kindName(n)
}
