package config

// Files lists every file the config names whose content shapes what sturdy
// serves: certificates and keys, CA bundles, the deny list, sorry pages,
// allow/deny lists and htpasswd files. The compile step hashes their
// content with the config's own bytes (compile.Runtime.Hash), so that a
// changed deny list or sorry page shows as a new config hash. A field
// that names such a file belongs here.
func (c *Config) Files() []string {
	var out []string
	add := func(names ...string) {
		for _, n := range names {
			if n != "" {
				out = append(out, n)
			}
		}
	}
	for _, l := range c.Listeners {
		if t := l.TLS; t != nil {
			add(t.Cert, t.Key, t.ClientAuth.CA)
			for _, crt := range t.Certificates {
				add(crt.Cert, crt.Key)
			}
		}
	}
	for _, p := range c.Pools {
		if t := p.TLS; t != nil {
			add(t.CA, t.Cert, t.Key)
		}
	}
	add(c.Edge.DenyFile)
	for _, r := range c.Routes {
		add(r.Sorry.BodyFile)
		for _, a := range r.Access {
			add(a.AllowFile, a.DenyFile)
		}
		if r.BasicAuth != nil {
			add(r.BasicAuth.Htpasswd)
		}
	}
	if c.ACME != nil {
		add(c.ACME.CARoot)
	}
	return out
}
