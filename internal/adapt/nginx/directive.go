package nginx

import (
	"strconv"
	"strings"
)

// Directive is one nginx directive: a name, its arguments, where it was
// written and, for block directives, its children. Directives pulled in by
// `include` appear in place of the include, each with its own File.
type Directive struct {
	// Name is the first word ("proxy_pass", "server", "location").
	Name string
	// Args are the remaining words, unquoted and unescaped as nginx does.
	Args []string
	// File is the path of the file the directive was read from, as the
	// include pattern or the caller named it.
	File string
	// Line is the 1-based line of the directive's first word.
	Line int
	// IsBlock reports whether the directive has a { } block; Children then
	// holds its contents (possibly none).
	IsBlock  bool
	Children []*Directive
	// Lua is the code of a *_by_lua_block directive, which nginx hands to
	// Lua unparsed; such directives have IsBlock false, IsLua true and no
	// Children.
	Lua   string
	IsLua bool
}

// Pos returns "file:line".
func (d *Directive) Pos() string {
	return d.File + ":" + strconv.Itoa(d.Line)
}

// Arg returns the i-th argument or "" when there are fewer.
func (d *Directive) Arg(i int) string {
	if i >= 0 && i < len(d.Args) {
		return d.Args[i]
	}
	return ""
}

// String renders the directive as one line of nginx syntax (without its
// block contents), for evidence in reports.
func (d *Directive) String() string {
	var b strings.Builder
	b.WriteString(d.Name)
	for _, a := range d.Args {
		b.WriteByte(' ')
		b.WriteString(quoteArg(a))
	}
	switch {
	case d.IsBlock:
		b.WriteString(" { ... }")
	case d.IsLua:
		b.WriteString(" { <lua> }")
	default:
		b.WriteByte(';')
	}
	return b.String()
}

func quoteArg(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\r\n;{}\"'#") {
		return a
	}
	return strconv.Quote(a)
}

// Child returns the first direct child named name, or nil.
func (d *Directive) Child(name string) *Directive {
	for _, c := range d.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// All returns the direct children named name, in file order.
func (d *Directive) All(name string) []*Directive {
	var out []*Directive
	for _, c := range d.Children {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// Walk calls fn for every directive in list and, depth first, for their
// children. fn returning false skips the directive's children.
func Walk(list []*Directive, fn func(*Directive) bool) {
	for _, d := range list {
		if fn(d) {
			Walk(d.Children, fn)
		}
	}
}
