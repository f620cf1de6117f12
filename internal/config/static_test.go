package config

import (
	"slices"
	"testing"
)

func TestStaticAndCompressDefaults(t *testing.T) {
	c, err := Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes:
  - { name: assets, path: /assets/, static: { alias: /srv/assets } }
  - { name: site, default: true, pool: web, static: { root: /srv/site }, compress: {} }
  - { name: spa, path: /app/, static: { root: /srv/app, try_files: [ $uri, /index.html ], dotfiles: forbid }, compress: { enabled: false, min_length: 0 } }
  - { name: api, path: /api/, pool: web, compress: { encodings: [ br ], min_length: 0, level: { br: 9 } } }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] } ]
`), "inline")
	if err != nil {
		t.Fatal(err)
	}
	assets, site, spa, api := c.Routes[0], c.Routes[1], c.Routes[2], c.Routes[3]
	if s := assets.Static; !slices.Equal(s.TryFiles, []string{"$uri", "$uri/"}) || !slices.Equal(s.Index, []string{"index.html"}) || s.Dotfiles != DotfilesDeny {
		t.Errorf("a route without a pool: %+v", s)
	}
	if s := site.Static; !slices.Equal(s.TryFiles, []string{"$uri", "$uri/", "@pool"}) {
		t.Errorf("a route with a pool falls through to it: %v", s.TryFiles)
	}
	if z := site.Compress; !z.Enabled || !slices.Equal(z.Encodings, DefaultCompressEncodings()) ||
		z.MinLength != DefaultCompressMinBytes || z.Level != (CompressLevel{DefaultGzipLevel, DefaultZstdLevel, DefaultBrotliLevel}) ||
		!slices.Equal(z.Types, DefaultCompressTypes()) {
		t.Errorf("compress: {} defaults: %+v", z)
	}
	if spa.Static.Dotfiles != DotfilesForbid || spa.Compress.Enabled || spa.Compress.MinLength != 0 {
		t.Errorf("written values kept: %+v %+v", spa.Static, spa.Compress)
	}
	if z := api.Compress; z.Level.Brotli != 9 || z.MinLength != 0 || !slices.Equal(z.Encodings, []string{"br"}) {
		t.Errorf("api: %+v", z)
	}
}

var tryFileCases = []struct {
	in   string
	want TryFile
}{
	{"$uri", TryFile{Kind: TryPath, HasURI: true}},
	{"$uri/", TryFile{Kind: TryDir, After: "/", HasURI: true}},
	{"$uri.html", TryFile{Kind: TryPath, After: ".html", HasURI: true}},
	{"/en$uri", TryFile{Kind: TryPath, Before: "/en", HasURI: true}},
	{"/index.html", TryFile{Kind: TryPath, Before: "/index.html"}},
	{"@pool", TryFile{Kind: TryPool}},
	{"=404", TryFile{Kind: TryStatus, Status: 404}},
}

func TestParseTryFile(t *testing.T) {
	for _, c := range tryFileCases {
		got, err := ParseTryFile(c.in)
		if err != nil || got != c.want {
			t.Errorf("%q: got %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}
