package translate

import "testing"

// mayMatchPrefixed is false only where the regex plainly cannot match a
// string with that start; matchesEvery only where it matches whatever
// follows.
func TestRegexAgainstAPathStart(t *testing.T) {
	for _, tt := range []struct {
		expr   string
		fold   bool
		prefix string
		may    bool
		every  bool
	}{
		{`^/(?:data|config|lib|3rdparty)(?:/|$)`, false, "/index.php/", false, false},
		{`^/(?:\.|occ|console|db_)`, false, "/index.php/", false, false},
		{`^/(?:\.|occ|index)`, false, "/index.php/", true, true},
		{`\.php(?:$|/)`, false, "/index.php/", true, true},
		{`\.php$`, false, "/index.php/", true, false},
		{`^/INDEX`, true, "/index.php/", true, true},
		{`^/INDEX`, false, "/index.php/", false, false},
		{`^/[a-h]+/`, false, "/index.php/", false, false},
		{`^/i.*\.css$`, false, "/index.php/", true, false},
		{`\.(css|js)$`, false, "/index.php/", true, false},
	} {
		if got := mayMatchPrefixed(tt.expr, tt.fold, tt.prefix); got != tt.may {
			t.Errorf("mayMatchPrefixed(%q, %q) = %v, want %v", tt.expr, tt.prefix, got, tt.may)
		}
		re, _ := compileRegex(tt.expr, tt.fold)
		if got := matchesEvery(re, tt.prefix); got != tt.every {
			t.Errorf("matchesEvery(%q, %q) = %v, want %v", tt.expr, tt.prefix, got, tt.every)
		}
	}
}
