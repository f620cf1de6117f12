package doctor

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Severity ranks findings.
type Severity int

// Severities, most severe last so that they compare naturally.
const (
	Low Severity = iota + 1
	Medium
	High
)

func (s Severity) String() string {
	switch s {
	case High:
		return "high"
	case Medium:
		return "medium"
	case Low:
		return "low"
	}
	return "unknown"
}

// MarshalJSON writes the severity as its name.
func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a severity name.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return err
	}
	for _, v := range []Severity{Low, Medium, High} {
		if v.String() == name {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q; expected high, medium or low", name)
}

// The incident patterns findings refer to (see the postmortems the project
// was built from).
const (
	Inc000     = "000 WAF/scanner ejection"
	Inc001     = "001 empty default pool"
	Inc001Pool = "001 empty pool answers bare 502"
	Inc001Log  = "001 error log flood"
	Inc001TLS  = "001 listener without certificate"
	Inc001Conn = "001 connection budget"
	Inc001DNS  = "001 DNS on the data path"
	Inc002     = "002 slow route ejects pool"
	Inc003     = "003 malformed request ejection"
	Inc004     = "004 stale cache hides outage"
	IncPassive = "000/002/003 passive ejection"
)

// Finding is one diagnosed risk or event.
type Finding struct {
	// ID names the check ("passive-5xx", "log-client-ejection"); stable for CI.
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// Title says what was found in one sentence.
	Title string `json:"title"`
	// File and Line point at the nginx directive responsible (or at the log
	// when there is no config).
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Incident is the incident pattern it matches.
	Incident string `json:"incident"`
	// Why it is dangerous.
	Why string `json:"why"`
	// NginxFix is how to fix it in nginx.
	NginxFix string `json:"nginx_fix"`
	// Sturdy is what sturdy does instead.
	Sturdy string `json:"sturdy"`
	// Evidence are config lines ("file:line: directive") or log lines.
	Evidence []string `json:"evidence"`
	// Score is how strongly the evidence supports the finding; within a
	// severity, higher scores come first. Log evidence outranks config.
	Score int `json:"score"`
}

// Pos returns "file:line", "file" or "".
func (f Finding) Pos() string {
	if f.Line > 0 {
		return fmt.Sprintf("%s:%d", f.File, f.Line)
	}
	return f.File
}

// sortFindings orders by severity, then score, then position and ID, so
// that output is stable.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.ID < b.ID
	})
}
