package kube

import (
	"os"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/kube/kubetest"
)

// env is the real API server the tests of this package share (one
// namespace per test); kubetest.Main starts and stops it.
var env kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }
