package accesslog

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestChosenFields(t *testing.T) {
	f, err := ParseFormat("json", []string{"request_id", "status", "upstream_status", "user_agent", "upstream_header_ms", "bytes_in"})
	if err != nil {
		t.Fatal(err)
	}
	r := sample
	r.Format, r.RequestID, r.UpstreamStatus, r.UserAgent, r.UpstreamHeader, r.BytesIn = f, "abc", 502, "curl/8", 1500*time.Microsecond, 7
	line := r.Append(nil)
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", line, err)
	}
	want := map[string]any{"request_id": "abc", "status": 200.0, "upstream_status": 502.0, "user_agent": "curl/8", "upstream_header_ms": 1.5, "bytes_in": 7.0}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if !strings.HasPrefix(string(line), `{"request_id":"abc"`) {
		t.Errorf("fields out of order: %s", line)
	}
}

// The default format is the access log's format before fields could be
// chosen, byte for byte.
func TestDefaultFormatUnchanged(t *testing.T) {
	f, err := ParseFormat("", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := sample
	r.Format = f
	if a, b := string(r.Append(nil)), string(sample.AppendJSON(nil)); a != b {
		t.Fatalf("default format\n%s\ndiffers from\n%s", a, b)
	}
	if f.WantsUpstreamTimes() || !f.Wants(FieldStatus) || f.Wants(FieldUserAgent) {
		t.Error("the default format wants the wrong fields")
	}
}

func TestCombined(t *testing.T) {
	f, _ := ParseFormat("combined", nil)
	r := Record{
		Time: time.Date(2026, 10, 4, 13, 55, 36, 0, time.FixedZone("", -7*3600)), Client: "203.0.113.7",
		Method: "GET", RequestURI: "/a b?q=\"x\"", Proto: "HTTP/1.1", Status: 200, Bytes: 2326,
		Referer: "", UserAgent: "Mozilla/5.0 \xff", Format: f,
	}
	want := `203.0.113.7 - - [04/Oct/2026:13:55:36 -0700] "GET /a b?q=\x22x\x22 HTTP/1.1" 200 2326 "-" "Mozilla/5.0 \xFF"`
	if got := string(r.Append(nil)); got != want {
		t.Fatalf("combined:\n%s\nwant\n%s", got, want)
	}
}

func TestParseFormatErrors(t *testing.T) {
	for _, c := range []struct {
		format string
		fields []string
		want   string
	}{
		{"xml", nil, `format: unknown format "xml"`},
		{"json", []string{"time", "nope"}, `fields[1]: unknown field "nope"`},
		{"json", []string{"time", "time"}, `fields[1]: "time" is listed twice`},
	} {
		if _, err := ParseFormat(c.format, c.fields); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFormat(%q, %v) = %v, want %q", c.format, c.fields, err, c.want)
		}
	}
}
