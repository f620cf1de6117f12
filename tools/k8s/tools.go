//go:build tools

// Package k8s pins the Kubernetes API server, controller manager and etcd
// that sturdy's Kubernetes tests start; nothing in sturdy imports it.
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
