package nginx

import (
	"strings"
)

// Format renders directives as nginx configuration text, one directive per
// line, blocks indented by four spaces. Included files appear in place of
// their include (they are spliced into the tree), so the result is one
// self-contained file. Parsing the result gives back the same names,
// arguments, blocks and Lua code (FuzzFormat checks this); comments and
// the original quoting are not kept.
func Format(list []*Directive) []byte {
	var b strings.Builder
	format(&b, list, 0)
	return []byte(b.String())
}

func format(b *strings.Builder, list []*Directive, depth int) {
	for _, d := range list {
		for range depth {
			b.WriteString("    ")
		}
		b.WriteString(formatWord(d.Name))
		for _, a := range d.Args {
			b.WriteByte(' ')
			b.WriteString(formatWord(a))
		}
		switch {
		case d.IsLua:
			// The code goes back byte for byte: it was read up to its
			// matching brace, so it reads back the same way.
			b.WriteString(" {")
			b.WriteString(d.Lua)
			b.WriteString("}\n")
		case d.IsBlock:
			b.WriteString(" {\n")
			format(b, d.Children, depth+1)
			for range depth {
				b.WriteString("    ")
			}
			b.WriteString("}\n")
		default:
			b.WriteString(";\n")
		}
	}
}

// formatWord writes a word bare when the lexer reads it back unchanged,
// else double-quoted with '"' and '\' escaped (the only escapes that make
// the lexer drop the backslash).
func formatWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\r\n;{}\"'\\#") {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		if c := w[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(w[i])
	}
	b.WriteByte('"')
	return b.String()
}
