package deploy

import (
	"os"
	"testing"

	"github.com/webhookd/webhookd/internal/testkit/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
