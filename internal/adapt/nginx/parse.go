// Package nginx reads nginx configuration: it parses a main file and every
// file it includes into a tree of directives that know their file and line,
// and offers a typed view of what sturdy cares about (upstreams, servers,
// listens, locations, with nginx's inheritance of settings).
//
// Why our own parser: we tried github.com/tufanbarisyildirim/gonginx (the
// module proxy serves only untagged pseudo-versions). On real configs it
// reports a block directive's line as the line of its closing brace (an
// `upstream` written on line 11 is reported at line 14), so findings would
// point at the wrong place; it fails on a `*_by_lua_block` whose Lua code has
// a brace inside a string (`ngx.say("}")`) without naming the file; it
// reorders an upstream's directives (servers after `check`); it rejects
// directives outside its built-in list unless told to skip validation; and it
// has no bound on nesting. nginx's grammar is tiny (words, quoted strings,
// ";", "{", "}", "#" comments, "${var}"), so a small lexer that mirrors
// ngx_conf_read_token is less code than working around those.
package nginx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Limits applied when Options leaves them zero.
const (
	DefaultMaxDepth        = 64       // nested blocks
	DefaultMaxIncludeDepth = 16       // include inside included file inside ...
	DefaultMaxFiles        = 4096     // files read in total
	DefaultMaxFileSize     = 16 << 20 // bytes per file
)

// FS is where included files are read from. The zero Options use the
// operating system's file system.
type FS interface {
	ReadFile(name string) ([]byte, error)
	// Glob returns the names matching pattern, as filepath.Glob does.
	Glob(pattern string) ([]string, error)
}

type osFS struct{}

func (osFS) ReadFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a config file", name)
	}
	return os.ReadFile(name)
}

func (osFS) Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

// Options tune parsing. The zero value reads from the OS with the default
// limits.
type Options struct {
	// FS reads included files. Nil means the operating system.
	FS FS
	// MaxDepth bounds block nesting. Zero means DefaultMaxDepth.
	MaxDepth int
	// MaxIncludeDepth bounds include chains. Zero means DefaultMaxIncludeDepth.
	MaxIncludeDepth int
	// MaxFiles bounds how many files one parse reads. Zero means DefaultMaxFiles.
	MaxFiles int
	// MaxFileSize bounds each file's size in bytes. Zero means DefaultMaxFileSize.
	MaxFileSize int
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = osFS{}
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxIncludeDepth <= 0 {
		o.MaxIncludeDepth = DefaultMaxIncludeDepth
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	return o
}

// Config is a parsed nginx configuration.
type Config struct {
	// Main is the path of the main file as given.
	Main string
	// Files lists every file read, the main file first, in include order.
	Files []string
	// Directives is the main context with includes spliced in.
	Directives []*Directive
	// Notes are problems that did not stop parsing: include patterns that
	// matched nothing, included files that could not be read.
	Notes []Note
}

// Note is a non-fatal problem found while reading a config.
type Note struct {
	File string
	Line int
	Msg  string
}

func (n Note) String() string { return fmt.Sprintf("%s:%d: %s", n.File, n.Line, n.Msg) }

// ParseFile reads the nginx config at path and every file it includes.
// Relative include paths are resolved against the directory of path, as
// nginx resolves them against its configuration prefix.
func ParseFile(path string, opt Options) (*Config, error) {
	opt = opt.withDefaults()
	src, err := readLimited(opt, path)
	if err != nil {
		return nil, fmt.Errorf("cannot read nginx config: %w", err)
	}
	return Parse(path, src, opt)
}

// Parse parses src as the main file named name. Includes are read through
// opt.FS relative to the directory of name.
func Parse(name string, src []byte, opt Options) (*Config, error) {
	opt = opt.withDefaults()
	p := &parser{opt: opt, dir: filepath.Dir(name), cfg: &Config{Main: name, Files: []string{name}}}
	p.stack = []string{filepath.Clean(name)}
	list, err := p.parseFile(name, src, 0)
	if err != nil {
		return nil, err
	}
	p.cfg.Directives = list
	return p.cfg, nil
}

func readLimited(opt Options, name string) ([]byte, error) {
	b, err := opt.FS.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if len(b) > opt.MaxFileSize {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d-byte limit for one config file", name, len(b), opt.MaxFileSize)
	}
	return b, nil
}

type parser struct {
	opt   Options
	dir   string // directory of the main file: base of relative includes
	cfg   *Config
	stack []string // files being read, outermost first: include cycle detection
}

func (p *parser) parseFile(name string, src []byte, depth int) ([]*Directive, error) {
	lx := newLexer(name, src)
	list, _, err := p.block(lx, depth, 0)
	return list, err
}

// block parses directives until the closing brace (openLine > 0) or the
// end of file (openLine == 0).
func (p *parser) block(lx *lexer, depth, openLine int) ([]*Directive, bool, error) {
	var list []*Directive
	for {
		t, err := lx.next()
		if err != nil {
			return nil, false, err
		}
		switch t.kind {
		case tokEOF:
			if openLine > 0 {
				return nil, false, lx.errorf(t.line, "unexpected end of file; the block opened at line %d has no closing }", openLine)
			}
			return list, true, nil
		case tokCloseBrace:
			if openLine == 0 {
				return nil, false, lx.errorf(t.line, "unexpected }; there is no open block to close")
			}
			return list, true, nil
		case tokSemicolon, tokOpenBrace:
			return nil, false, lx.errorf(t.line, "unexpected %q; expected a directive name", t.text)
		}
		d, err := p.directive(lx, t, depth)
		if err != nil {
			return nil, false, err
		}
		if d.Name == "include" && !d.IsBlock {
			inc, err := p.include(d, depth)
			if err != nil {
				return nil, false, err
			}
			list = append(list, inc...)
			continue
		}
		list = append(list, d)
	}
}

// directive reads the arguments and the block of the directive whose name
// token is first.
func (p *parser) directive(lx *lexer, first token, depth int) (*Directive, error) {
	d := &Directive{Name: first.text, File: lx.file, Line: first.line}
	for {
		t, err := lx.next()
		if err != nil {
			return nil, err
		}
		switch t.kind {
		case tokWord:
			d.Args = append(d.Args, t.text)
		case tokSemicolon:
			return d, nil
		case tokOpenBrace:
			if strings.HasSuffix(d.Name, "_by_lua_block") {
				body, err := lx.luaBody(t.line)
				if err != nil {
					return nil, err
				}
				d.Lua, d.IsLua = body.text, true
				return d, nil
			}
			if depth+1 > p.opt.MaxDepth {
				return nil, lx.errorf(t.line, "blocks nested more than %d deep; is a } missing?", p.opt.MaxDepth)
			}
			children, _, err := p.block(lx, depth+1, t.line)
			if err != nil {
				return nil, err
			}
			d.IsBlock, d.Children = true, children
			return d, nil
		case tokCloseBrace:
			return nil, lx.errorf(t.line, "unexpected } after %q; is a ; missing?", d.Name)
		case tokEOF:
			return nil, lx.errorf(d.Line, "unexpected end of file in %q; expected ; or {", d.Name)
		}
	}
}

// include reads the files an include directive names and returns their
// directives, parsed at the nesting depth of the include.
func (p *parser) include(d *Directive, depth int) ([]*Directive, error) {
	if len(d.Args) != 1 {
		return nil, &SyntaxError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("include takes exactly one file or pattern, got %d arguments", len(d.Args))}
	}
	if len(p.stack) > p.opt.MaxIncludeDepth {
		return nil, &SyntaxError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("includes nested more than %d deep (%s)", p.opt.MaxIncludeDepth, strings.Join(p.stack, " -> "))}
	}
	pattern := d.Args[0]
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(p.dir, pattern)
	}
	var names []string
	if hasGlobMeta(pattern) {
		matches, err := p.opt.FS.Glob(pattern)
		if err != nil {
			return nil, &SyntaxError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("bad include pattern %q: %v", d.Args[0], err)}
		}
		for _, m := range matches {
			// glob(3), which nginx uses, does not let * match a leading dot.
			if strings.HasPrefix(filepath.Base(m), ".") && !strings.HasPrefix(filepath.Base(pattern), ".") {
				continue
			}
			names = append(names, m)
		}
		slices.Sort(names)
		if len(names) == 0 {
			p.note(d, "include %q matched no files", d.Args[0])
		}
	} else {
		names = []string{pattern}
	}
	var out []*Directive
	for _, name := range names {
		clean := filepath.Clean(name)
		if i := slices.Index(p.stack, clean); i >= 0 {
			chain := append(slices.Clone(p.stack[i:]), clean)
			return nil, &SyntaxError{File: d.File, Line: d.Line, Msg: "include cycle: " + strings.Join(chain, " -> ")}
		}
		if len(p.cfg.Files) >= p.opt.MaxFiles {
			return nil, &SyntaxError{File: d.File, Line: d.Line, Msg: fmt.Sprintf("more than %d files included; is an include pattern too broad?", p.opt.MaxFiles)}
		}
		src, err := readLimited(p.opt, name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				p.note(d, "included file %s does not exist; its directives were not checked", name)
			} else {
				p.note(d, "cannot read included file: %v", err)
			}
			continue
		}
		p.cfg.Files = append(p.cfg.Files, name)
		p.stack = append(p.stack, clean)
		list, err := p.parseFile(name, src, depth)
		p.stack = p.stack[:len(p.stack)-1]
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

func (p *parser) note(d *Directive, format string, args ...any) {
	p.cfg.Notes = append(p.cfg.Notes, Note{File: d.File, Line: d.Line, Msg: fmt.Sprintf(format, args...)})
}

func hasGlobMeta(s string) bool { return strings.ContainsAny(s, "*?[") }
