package translate

import (
	"go.yaml.in/yaml/v3"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Rendering of the route features beyond proxying: files, compression,
// access control.

func renderStatic(s *staticPlan) *yaml.Node {
	c := s.config()
	m := mapping()
	if c.Root != "" {
		set(m, "root", str(c.Root), "", "")
	} else {
		set(m, "alias", str(c.Alias), "", "")
	}
	if c.Index != nil {
		set(m, "index", flowList(c.Index), "", "nginx index")
	}
	if c.TryFiles != nil {
		set(m, "try_files", flowList(c.TryFiles), "", "")
	}
	if c.Autoindex {
		set(m, "autoindex", yes(), "", "")
	}
	set(m, "dotfiles", str(c.Dotfiles), "", "nginx serves files whose names start with a dot")
	if c.CacheControl != "" {
		set(m, "cache_control", str(c.CacheControl), "", "")
	}
	if c.Expires > 0 {
		set(m, "expires", dur(c.Expires.D()), "", "nginx expires")
	}
	if c.Precompressed != nil {
		set(m, "precompressed", flowList(c.Precompressed), "", "nginx gzip_static")
	}
	return m
}

func renderCompress(cp *compressPlan) *yaml.Node {
	c := cp.config()
	m := mapping()
	set(m, "encodings", flowList(c.Encodings), "", "nginx offers gzip only")
	if c.Types != nil {
		set(m, "types", flowList(c.Types), "", "text/html and nginx gzip_types")
	}
	if c.MinLength != config.DefaultCompressMinBytes {
		set(m, "min_length", num(int(c.MinLength)), "", "nginx gzip_min_length")
	}
	lv := mapping()
	set(lv, "gzip", num(c.Level.Gzip), "", "nginx gzip_comp_level")
	set(m, "level", lv, "", "")
	return m
}
