package config

// Static files and response compression per route: the types, their
// defaults and their validation. Nothing here reads a file; package static
// checks the directory when the config is compiled.

import (
	"fmt"
	"strconv"
	"strings"
)

// Static serves a route from files on disk, in the way of nginx's root,
// alias, index and try_files.
type Static struct {
	// Root is the directory the whole request path is appended to:
	// root /var/www and /img/a.png read /var/www/img/a.png. Give root or
	// alias, not both. A relative path is relative to sturdy's working
	// directory.
	Root string `yaml:"root"`
	// Alias is the directory that replaces the route's path prefix: a route
	// on /static/ with alias /srv/assets reads /srv/assets/css/a.css for
	// /static/css/a.css.
	Alias string `yaml:"alias"`
	// Index lists the files tried, in order, for a request that names a
	// directory. Plain file names. Default [index.html].
	Index []string `yaml:"index"`
	// TryFiles is the chain tried in order, the first that exists answering
	// (see ParseTryFile). Default [$uri, $uri/, @pool] on a route with a
	// pool, [$uri, $uri/] without one; when nothing matches, 404.
	TryFiles []string `yaml:"try_files"`
	// Autoindex answers a directory without an index file with a listing.
	// Default false: such a directory does not match and the chain goes on.
	Autoindex bool `yaml:"autoindex"`
	// Dotfiles is what a request for a path with a segment starting with
	// "." gets (/.git/config, /.env): "deny" (default) answers 404 at once,
	// as if the file did not exist, so a scanner learns nothing; "forbid"
	// answers 403; "allow" serves them. /.well-known/ is always allowed.
	Dotfiles string `yaml:"dotfiles"`
	// CacheControl is sent verbatim as Cache-Control on files served (200,
	// 206 and 304). Default: none.
	CacheControl string `yaml:"cache_control"`
	// Expires adds max-age (in seconds) to Cache-Control, like nginx's
	// expires. Default 0: none.
	Expires Duration `yaml:"expires"`
	// Precompressed lists the sibling files looked for, in the server's
	// order of preference, when the client accepts them: br (FILE.br), zstd
	// (FILE.zst), gzip (FILE.gz). Default: none.
	Precompressed []string `yaml:"precompressed"`
}

// Compress compresses a route's responses on the fly.
type Compress struct {
	// Enabled turns compression on. Default true when the compress block is
	// written, so `compress: {}` is enough.
	Enabled bool `yaml:"enabled"`
	// Encodings are the codings offered, in the server's order of
	// preference when the client's q-values tie: zstd, br, gzip.
	// Default [zstd, gzip] (see docs/static.md for why br is opt-in).
	Encodings []string `yaml:"encodings"`
	// Types are the compressible Content-Types: "text/html" exactly,
	// "text/*" for a whole type, "application/*+json" for a suffix.
	// Default: DefaultCompressTypes. text/event-stream is never compressed.
	Types []string `yaml:"types"`
	// MinLength is the smallest body compressed, counted from Content-Length
	// or from the bytes buffered when there is none. Default 512.
	MinLength Size `yaml:"min_length"`
	// Level per coding; 0 means the default.
	Level CompressLevel `yaml:"level"`
}

// CompressLevel is the compression level of each coding.
type CompressLevel struct {
	// Gzip is 1 (fastest) to 9 (smallest). Default 6.
	Gzip int `yaml:"gzip"`
	// Zstd is 1 to 22 as zstd's own levels, mapped onto the encoder's four
	// speeds: 1-2 fastest, 3-5 default, 6-9 better, 10+ best. Default 3.
	Zstd int `yaml:"zstd"`
	// Brotli is 1 to 11. Default 5.
	Brotli int `yaml:"br"`
}

// Static and compression defaults, in one place. docs/static.md lists the
// same values and the measurements behind the levels.
const (
	DefaultStaticIndex      = "index.html"
	DefaultDotfiles         = DotfilesDeny
	DefaultCompressMinBytes = 512
	DefaultGzipLevel        = 6
	DefaultZstdLevel        = 3
	DefaultBrotliLevel      = 5
)

// Dotfiles policies.
const (
	DotfilesDeny   = "deny"
	DotfilesForbid = "forbid"
	DotfilesAllow  = "allow"
)

// Content codings, as written in the config and in Content-Encoding.
const (
	EncodingGzip   = "gzip"
	EncodingZstd   = "zstd"
	EncodingBrotli = "br"
)

// DefaultCompressEncodings returns the codings offered when encodings is
// not written, in order of preference.
func DefaultCompressEncodings() []string { return []string{EncodingZstd, EncodingGzip} }

// DefaultCompressTypes returns the compressible types used when types is
// not written: text, the JSON and XML families, JavaScript, SVG, WebAssembly
// and the font formats that are not compressed already.
func DefaultCompressTypes() []string {
	return []string{
		"text/*",
		"application/json", "application/*+json", "application/x-ndjson",
		"application/javascript", "application/x-javascript", "application/ecmascript",
		"application/xml", "application/*+xml",
		"image/svg+xml", "image/x-icon", "image/vnd.microsoft.icon", "image/bmp",
		"application/wasm",
		"font/ttf", "font/otf", "application/vnd.ms-fontobject", "application/x-font-ttf",
		"application/graphql-response+json",
	}
}

// TryFile kinds.
const (
	TryPath   = iota // a file: $uri, $uri.html, /index.html
	TryDir           // a directory's index (or listing): $uri/
	TryPool          // @pool: the route's pool answers
	TryStatus        // =404: answer with that status
)

// TryFile is one parsed entry of try_files.
type TryFile struct {
	Kind int
	// Before and After surround $uri in a template ($uri.html: "", ".html");
	// a fixed path (/index.html) is all Before, with HasURI false.
	Before, After string
	HasURI        bool
	// Status is the status of a TryStatus entry.
	Status int
}

// ParseTryFile reads one try_files entry:
//   - "$uri" (the request's path), or a template holding $uri once
//     ("$uri.html", "/en$uri"): a file;
//   - a template ending in "/" ("$uri/"): a directory, answered by its
//     index file or listing;
//   - a fixed path starting with "/" ("/index.html"): that file, relative
//     to root or alias, whatever was asked (single-page apps);
//   - "@pool": the route's pool answers (must be last);
//   - "=CODE" ("=404"): answer with that status (must be last).
func ParseTryFile(s string) (TryFile, error) {
	switch {
	case s == "@pool":
		return TryFile{Kind: TryPool}, nil
	case strings.HasPrefix(s, "@"):
		return TryFile{}, fmt.Errorf("%q: the only named target is @pool (the route's pool)", s)
	case strings.HasPrefix(s, "="):
		n, err := strconv.Atoi(s[1:])
		if err != nil || n < 200 || n > 599 {
			return TryFile{}, fmt.Errorf("%q: expected =CODE with a status from 200 to 599, like =404", s)
		}
		return TryFile{Kind: TryStatus, Status: n}, nil
	}
	before, after, has := strings.Cut(s, "$uri")
	if strings.Contains(after, "$") || strings.Contains(before, "$") {
		return TryFile{}, fmt.Errorf("%q: $uri is the only variable, and may appear once", s)
	}
	if !has && !strings.HasPrefix(s, "/") {
		return TryFile{}, fmt.Errorf("%q: expected $uri, a template like $uri.html or $uri/, a path starting with /, @pool or =404", s)
	}
	if has && before != "" && !strings.HasPrefix(before, "/") {
		return TryFile{}, fmt.Errorf("%q: text before $uri must start with /", s)
	}
	for _, seg := range strings.Split(before+after, "/") {
		if seg == ".." {
			return TryFile{}, fmt.Errorf("%q: .. segments are not allowed; files are always inside root or alias", s)
		}
	}
	if strings.ContainsAny(s, "\x00?#") {
		return TryFile{}, fmt.Errorf("%q: a file name cannot hold ?, # or NUL", s)
	}
	t := TryFile{Kind: TryPath, Before: before, After: after, HasURI: has}
	if strings.HasSuffix(s, "/") {
		t.Kind = TryDir
	}
	return t, nil
}

func (c *Config) setStaticDefaults() {
	for i := range c.Routes {
		r := &c.Routes[i]
		if s := r.Static; s != nil {
			if s.Index == nil {
				s.Index = []string{DefaultStaticIndex}
			}
			if s.TryFiles == nil {
				s.TryFiles = []string{"$uri", "$uri/"}
				if r.Pool != "" {
					s.TryFiles = append(s.TryFiles, "@pool")
				}
			}
			if s.Dotfiles == "" {
				s.Dotfiles = DefaultDotfiles
			}
		}
		if z := r.Compress; z != nil {
			p := fmt.Sprintf("routes[%d].compress", i)
			if !c.Has(p + ".enabled") {
				z.Enabled = true
			}
			if z.Encodings == nil {
				z.Encodings = DefaultCompressEncodings()
			}
			if z.Types == nil {
				z.Types = DefaultCompressTypes()
			}
			if !c.Has(p + ".min_length") {
				z.MinLength = DefaultCompressMinBytes
			}
			if z.Level.Gzip == 0 {
				z.Level.Gzip = DefaultGzipLevel
			}
			if z.Level.Zstd == 0 {
				z.Level.Zstd = DefaultZstdLevel
			}
			if z.Level.Brotli == 0 {
				z.Level.Brotli = DefaultBrotliLevel
			}
		}
	}
}

func (v *validator) static() {
	for i, r := range v.c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		if r.Static != nil {
			v.staticFiles(p+".static", r)
		}
		if r.Compress != nil {
			v.compress(p+".compress", r.Compress)
		}
	}
}

func (v *validator) staticFiles(p string, r Route) {
	s := r.Static
	switch {
	case s.Root != "" && s.Alias != "":
		v.errorf(p, "give root or alias, not both: root appends the whole request path, alias replaces the route's path %s", r.Path)
	case s.Root == "" && s.Alias == "":
		v.errorf(p, "missing root or alias; expected the directory to serve, like root: /var/www/site")
	}
	if strings.ContainsRune(s.Root+s.Alias, 0) {
		v.errorf(p, "the directory name holds a NUL byte")
	}
	for j, name := range s.Index {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			v.errorf(fmt.Sprintf("%s.index[%d]", p, j), "invalid index file %q; expected a plain file name like index.html", name)
		}
	}
	if len(s.TryFiles) == 0 {
		v.errorf(p+".try_files", "empty; leave it out for the default, or list at least one entry like $uri")
	}
	for j, entry := range s.TryFiles {
		jp := fmt.Sprintf("%s.try_files[%d]", p, j)
		t, err := ParseTryFile(entry)
		if err != nil {
			v.errorf(jp, "%v", err)
			continue
		}
		if (t.Kind == TryPool || t.Kind == TryStatus) && j != len(s.TryFiles)-1 {
			v.errorf(jp, "%q must be the last entry; nothing after it would ever be tried", entry)
		}
		if t.Kind == TryPool && r.Pool == "" {
			v.errorf(jp, "@pool but the route has no pool; name one with pool, or end the chain with =404")
		}
	}
	if r.Pool == "" && r.Fallback.Pool != "" {
		v.errorf(strings.TrimSuffix(p, ".static")+".fallback.pool", "the route has no pool to fall back from; files answer it")
	}
	switch s.Dotfiles {
	case DotfilesDeny, DotfilesForbid, DotfilesAllow:
	default:
		v.errorf(p+".dotfiles", "unknown policy %q; expected deny (404), forbid (403) or allow", s.Dotfiles)
	}
	if strings.ContainsAny(s.CacheControl, "\r\n\x00") {
		v.errorf(p+".cache_control", "holds a line break or NUL; give the header's value on one line, like public, max-age=3600")
	}
	if s.Expires > 0 && strings.Contains(strings.ToLower(s.CacheControl), "max-age") {
		v.errorf(p+".expires", "cache_control already has max-age; give max-age in one place")
	}
	if s.Expires > 0 && s.Expires.D().Seconds() < 1 {
		v.errorf(p+".expires", "%s is shorter than 1s, the unit of max-age", s.Expires)
	}
	v.encodingList(p+".precompressed", s.Precompressed, false)
}

// maxCompressMinLength bounds min_length: that many bytes are held in
// memory per response before the decision.
const maxCompressMinLength = 1 << 20

func (v *validator) compress(p string, z *Compress) {
	v.encodingList(p+".encodings", z.Encodings, z.Enabled)
	if z.MinLength > maxCompressMinLength {
		v.errorf(p+".min_length", "%s is more than 1MiB; that much of each response would be held in memory before compressing", z.MinLength)
	}
	for j, t := range z.Types {
		if err := checkMediaPattern(t); err != nil {
			v.errorf(fmt.Sprintf("%s.types[%d]", p, j), "%v", err)
		}
	}
	if z.Level.Gzip < 1 || z.Level.Gzip > 9 {
		v.errorf(p+".level.gzip", "level %d out of range; expected 1 (fastest) to 9 (smallest)", z.Level.Gzip)
	}
	if z.Level.Zstd < 1 || z.Level.Zstd > 22 {
		v.errorf(p+".level.zstd", "level %d out of range; expected 1 to 22", z.Level.Zstd)
	}
	if z.Level.Brotli < 1 || z.Level.Brotli > 11 {
		v.errorf(p+".level.br", "level %d out of range; expected 1 to 11", z.Level.Brotli)
	}
}

// encodingList checks a list of content codings; required means it may not
// be empty.
func (v *validator) encodingList(p string, list []string, required bool) {
	if required && len(list) == 0 {
		v.errorf(p, "empty; list at least one of zstd, br, gzip, or set enabled: false")
	}
	seen := map[string]int{}
	for j, e := range list {
		jp := fmt.Sprintf("%s[%d]", p, j)
		switch e {
		case EncodingGzip, EncodingZstd, EncodingBrotli:
		default:
			v.errorf(jp, "unknown coding %q; expected zstd, br or gzip", e)
			continue
		}
		if k, dup := seen[e]; dup {
			v.errorf(jp, "%s is already listed at [%d]", e, k)
		}
		seen[e] = j
	}
}

// checkMediaPattern accepts "type/subtype", "type/*" and "type/*+suffix".
func checkMediaPattern(s string) error {
	major, minor, ok := strings.Cut(s, "/")
	bad := !ok || major == "" || minor == "" || major == "*" || strings.ContainsAny(s, " ;,") || strings.Contains(minor, "/") ||
		(strings.Contains(minor, "*") && minor != "*" && !(strings.HasPrefix(minor, "*+") && len(minor) > 2 && !strings.Contains(minor[1:], "*")))
	if bad {
		return fmt.Errorf("invalid type %q; expected like text/html, text/* or application/*+json", s)
	}
	return nil
}
