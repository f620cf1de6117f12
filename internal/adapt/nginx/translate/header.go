package translate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// header is the comment at the top of the output: warnings, the blocks
// that were refused, not translated or translated with differences, and
// the directives not translated, grouped by reason.
func (t *translator) header() string {
	var h []string
	h = append(h,
		"sturdy configuration translated from nginx by `sturdy import nginx`.",
		fmt.Sprintf("Source: %s (%s).", t.site.Config.Main, plural(len(t.site.Config.Files), "file", "files")),
		"Check it with `sturdy check FILE`, read the comments, and run it next to nginx before switching.",
	)
	if len(t.warnings) > 0 {
		h = append(h, "", "WARNINGS")
		for _, w := range t.warnings {
			h = append(h, "  "+w)
		}
	}
	var open, refused, differs []*Block
	for _, b := range t.blocks {
		switch b.Status {
		case NotTranslated:
			open = append(open, b)
		case Refused:
			refused = append(refused, b)
		case TranslatedDiffers:
			differs = append(differs, b)
		}
	}
	blockList := func(title string, bs []*Block) {
		if len(bs) == 0 {
			return
		}
		h = append(h, "", fmt.Sprintf("%s (%d):", title, len(bs)))
		for _, b := range bs {
			what := b.Server
			if b.Location != "" {
				what += ", location " + b.Location
			}
			h = append(h, fmt.Sprintf("  %s: %s", b.Pos(), what))
			for _, r := range b.Reasons {
				h = append(h, "      "+r)
			}
		}
	}
	blockList("REFUSED: access rules sturdy cannot reproduce; these answer with a refusal page, never a backend", refused)
	blockList("SERVER BLOCKS AND LOCATIONS NOT TRANSLATED: their requests reach whichever route matches them, or get 404", open)
	blockList("TRANSLATED WITH DIFFERENCES", differs)
	if len(t.items) > 0 {
		h = append(h, "", fmt.Sprintf("NOT TRANSLATED (%d): what nginx does that this file does not, grouped by reason", len(t.items)))
		for _, g := range groupItems(t.items) {
			h = append(h, "", "  "+g.reason+":")
			for _, it := range g.items {
				h = append(h, fmt.Sprintf("    %s:%d: %s", it.File, it.Line, clipDirective(it.Directive)))
			}
		}
	}
	for i, l := range h {
		h[i] = strings.TrimRight("# "+clean(l), " ")
	}
	return strings.Join(h, "\n")
}

type itemGroup struct {
	reason string
	items  []Item
}

// groupItems groups items by reason, groups in order of their first item's
// position, items in file order.
func groupItems(items []Item) []itemGroup {
	sorted := append([]Item(nil), items...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].File != sorted[j].File {
			return sorted[i].File < sorted[j].File
		}
		return sorted[i].Line < sorted[j].Line
	})
	var out []itemGroup
	idx := map[string]int{}
	for _, it := range sorted {
		i, ok := idx[it.Reason]
		if !ok {
			i = len(out)
			idx[it.Reason] = i
			out = append(out, itemGroup{reason: it.Reason})
		}
		out[i].items = append(out[i].items, it)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func clipDirective(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 90 {
		return s[:87] + "..."
	}
	return s
}
