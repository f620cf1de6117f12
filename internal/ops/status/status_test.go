package status

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

func get(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// Every file the page refers to is embedded, so the page works offline
// and needs nothing from elsewhere.
func TestPageAssetsAreEmbedded(t *testing.T) {
	h := New(func() view.Status { return view.Status{} })
	page := get(h, "GET", "/status").Body.String()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("found %d references in the page", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		if strings.Contains(ref, "//") {
			t.Errorf("the page refers to another origin: %s", ref)
			continue
		}
		if !strings.HasPrefix(ref, "status/") {
			continue // api/status, metrics, readyz: the admin handler's
		}
		if rec := get(h, "GET", "/"+ref); rec.Code != 200 || rec.Body.Len() == 0 {
			t.Errorf("%s: %d", ref, rec.Code)
		}
	}
}

// One evidence value JSON cannot hold must not blank the page.
func TestJSONSurvivesOddEvidence(t *testing.T) {
	h := New(func() view.Status {
		return view.Status{Time: time.Unix(0, 0), Events: []event.Event{
			{Seq: 1, Type: event.HostEjected, Evidence: map[string]any{"fn": func() {}, "n": 3}},
		}}
	})
	rec := get(h, "GET", "/api/status")
	var st view.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if st.Events[0].Evidence["n"] != "3" || st.Events[0].Evidence["fn"] == nil {
		t.Errorf("evidence %v", st.Events[0].Evidence)
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Error("status JSON may be cached")
	}
}

func TestMethodsAndUnknownPaths(t *testing.T) {
	h := New(func() view.Status { return view.Status{} })
	if rec := get(h, "POST", "/api/status"); rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d", rec.Code)
	}
	if rec := get(h, "HEAD", "/status"); rec.Code != 200 {
		t.Errorf("HEAD: %d", rec.Code)
	}
	for _, p := range []string{"/status/../etc/passwd", "/status/assets/app.js", "/other"} {
		if rec := get(h, "GET", p); rec.Code != 404 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
}
