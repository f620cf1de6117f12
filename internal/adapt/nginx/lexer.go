package nginx

import (
	"fmt"
	"strings"
)

// tokenKind is what a token is.
type tokenKind int

const (
	tokWord       tokenKind = iota // a bare or quoted word
	tokSemicolon                   // ;
	tokOpenBrace                   // {
	tokCloseBrace                  // }
	tokLuaBody                     // the raw body of a *_by_lua_block, braces stripped
	tokEOF
)

// token is one lexical unit of an nginx config file.
type token struct {
	kind   tokenKind
	text   string // unquoted, unescaped value for words; the code for a Lua body
	line   int
	quoted bool
}

// lexer splits nginx configuration text into tokens the way nginx's
// ngx_conf_read_token does: words separated by whitespace, single- or
// double-quoted strings with backslash escapes, ";", "{", "}", and "#"
// comments that run to the end of the line. "${name}" inside a word is part
// of the word, so `"$host${uri}"` and `$scheme${port}` lex as one word.
// A "}" ends a block only where a word could start.
type lexer struct {
	file string
	src  string
	pos  int
	line int
}

func newLexer(file string, src []byte) *lexer {
	return &lexer{file: file, src: string(src), line: 1}
}

// SyntaxError is a lexical or grammatical error at a position in a file.
type SyntaxError struct {
	File string
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

func (l *lexer) errorf(line int, format string, args ...any) error {
	return &SyntaxError{File: l.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// next returns the next token.
func (l *lexer) next() (token, error) {
	for {
		for l.pos < len(l.src) && isSpace(l.src[l.pos]) {
			if l.src[l.pos] == '\n' {
				l.line++
			}
			l.pos++
		}
		if l.pos >= len(l.src) {
			return token{kind: tokEOF, line: l.line}, nil
		}
		if l.src[l.pos] != '#' {
			break
		}
		for l.pos < len(l.src) && l.src[l.pos] != '\n' {
			l.pos++
		}
	}
	start := l.line
	switch c := l.src[l.pos]; c {
	case ';':
		l.pos++
		return token{kind: tokSemicolon, text: ";", line: start}, nil
	case '{':
		l.pos++
		return token{kind: tokOpenBrace, text: "{", line: start}, nil
	case '}':
		l.pos++
		return token{kind: tokCloseBrace, text: "}", line: start}, nil
	case '"', '\'':
		return l.quoted(c)
	}
	return l.word()
}

// quoted reads a quoted string starting at the opening quote. As in nginx,
// the closing quote must be followed by whitespace, ";" or "{", or by ")",
// which then starts the next word: `if ($x = 'y')` is four words, the last
// one ")".
func (l *lexer) quoted(q byte) (token, error) {
	start := l.line
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			return token{}, l.errorf(start, "unterminated %c-quoted string; add the closing %c", q, q)
		}
		c := l.src[l.pos]
		switch {
		case c == '\\' && l.pos+1 < len(l.src):
			l.escape(&b)
			continue
		case c == q:
			l.pos++
			if l.pos < len(l.src) {
				if n := l.src[l.pos]; !isSpace(n) && n != ';' && n != '{' && n != ')' {
					return token{}, l.errorf(l.line, "unexpected %q right after a quoted string; separate words with a space", n)
				}
			}
			return token{kind: tokWord, text: b.String(), line: start, quoted: true}, nil
		case c == '\n':
			l.line++
		}
		b.WriteByte(c)
		l.pos++
	}
}

// word reads a bare word. As in nginx's ngx_conf_read_token, a word ends
// at whitespace, ";" or "{", except that "{" right after "$" opens a
// variable name ("${name}") and stays in the word; "}" and quotes inside a
// word are ordinary bytes (`return 200 a}` is valid nginx). A backslash
// escapes the next byte.
func (l *lexer) word() (token, error) {
	start := l.line
	var b strings.Builder
	dollar := false
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '{' && dollar:
		case isSpace(c) || c == ';' || c == '{':
			return token{kind: tokWord, text: b.String(), line: start}, nil
		case c == '\\' && l.pos+1 < len(l.src):
			l.escape(&b)
			dollar = false
			continue
		}
		dollar = c == '$'
		b.WriteByte(c)
		l.pos++
	}
	return token{kind: tokWord, text: b.String(), line: start}, nil
}

// escape consumes a backslash and the byte after it. Like nginx, it turns
// \" \' \\ into the quote or backslash and \t \r \n into control
// characters, and keeps any other pair as written, so that regular
// expressions such as `\.php$` reach the directive unchanged.
func (l *lexer) escape(b *strings.Builder) {
	n := l.src[l.pos+1]
	switch n {
	case '"', '\'', '\\':
		b.WriteByte(n)
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'n':
		b.WriteByte('\n')
	default:
		if n == '\n' {
			l.line++
		}
		b.WriteByte('\\')
		b.WriteByte(n)
	}
	l.pos += 2
}

// luaBody reads the body of a *_by_lua_block after its "{" up to the
// matching "}", skipping Lua strings, long brackets and comments so that a
// brace inside them (`ngx.say("}")`) does not end the block. This follows
// what lua-nginx-module's own block lexer accepts.
func (l *lexer) luaBody(open int) (token, error) {
	start := l.pos
	depth := 1
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == '{':
			depth++
			l.pos++
		case c == '}':
			depth--
			if depth == 0 {
				body := l.src[start:l.pos]
				l.pos++
				return token{kind: tokLuaBody, text: body, line: open}, nil
			}
			l.pos++
		case c == '"' || c == '\'':
			if err := l.luaString(c); err != nil {
				return token{}, err
			}
		case c == '-' && strings.HasPrefix(l.src[l.pos:], "--"):
			l.pos += 2
			if lvl, ok := l.longBracket(); ok {
				if err := l.skipLongBracket(lvl); err != nil {
					return token{}, err
				}
				continue
			}
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '[':
			if lvl, ok := l.longBracket(); ok {
				if err := l.skipLongBracket(lvl); err != nil {
					return token{}, err
				}
				continue
			}
			l.pos++
		default:
			l.pos++
		}
	}
	return token{}, l.errorf(open, "unterminated Lua block; its closing } is missing")
}

func (l *lexer) luaString(q byte) error {
	start := l.line
	l.pos++
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch c {
		case '\\':
			if l.pos+1 < len(l.src) && l.src[l.pos+1] == '\n' {
				l.line++
			}
			l.pos += 2
			continue
		case '\n':
			return l.errorf(start, "unterminated Lua string")
		case q:
			l.pos++
			return nil
		}
		l.pos++
	}
	return l.errorf(start, "unterminated Lua string")
}

// longBracket reports whether a Lua long bracket "[[" or "[==[" starts at
// the current position, and its level (the number of "=").
func (l *lexer) longBracket() (int, bool) {
	if l.pos >= len(l.src) || l.src[l.pos] != '[' {
		return 0, false
	}
	i := l.pos + 1
	for i < len(l.src) && l.src[i] == '=' {
		i++
	}
	if i < len(l.src) && l.src[i] == '[' {
		lvl := i - l.pos - 1
		l.pos = i + 1
		return lvl, true
	}
	return 0, false
}

func (l *lexer) skipLongBracket(lvl int) error {
	start := l.line
	closer := "]" + strings.Repeat("=", lvl) + "]"
	end := strings.Index(l.src[l.pos:], closer)
	if end < 0 {
		return l.errorf(start, "unterminated Lua long string or comment; %s is missing", closer)
	}
	l.line += strings.Count(l.src[l.pos:l.pos+end], "\n")
	l.pos += end + len(closer)
	return nil
}
