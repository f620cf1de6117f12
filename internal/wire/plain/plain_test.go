package plain

import (
	"net/http/httptest"
	"testing"
)

func TestAPlainAnswerIsNeitherSniffedNorStored(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("Retry-After", "1")
	if got := Write(w, 503, "503 Service Unavailable: busy.\n"); got != 503 {
		t.Errorf("returned %d", got)
	}
	h := w.Result().Header
	for k, v := range map[string]string{
		"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store", "Content-Length": "31", "Retry-After": "1",
	} {
		if h.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, h.Get(k), v)
		}
	}
	if w.Code != 503 || w.Body.String() != "503 Service Unavailable: busy.\n" {
		t.Errorf("%d %q", w.Code, w.Body)
	}
}
