package admin_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestReloadWithoutAFile: a process started without a configuration file
// to read again answers POST /admin/reload 409 saying so (the reload
// itself is tested on the real process, cmd/webhookd TestReloadUnderLoad).
func TestReloadWithoutAFile(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var e struct{ Error string }
	if code := b.do(t, http.MethodPost, "/admin/reload", "", &e); code != http.StatusConflict || !strings.Contains(e.Error, "without a configuration file") {
		t.Errorf("POST /admin/reload: %d %q, want 409 saying there is no file to read again", code, e.Error)
	}
}
