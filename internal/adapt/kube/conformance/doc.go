// Package conformance runs the Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance) against sturdy in Kubernetes mode,
// on the real kube-apiserver, etcd and kube-controller-manager that
// tools/k8s builds, with a pod runner of its own in place of a scheduler
// and kubelet. Its tests are behind the conformance build tag (they take
// minutes and bind ports 80, 443 and 8080 on loopback addresses):
//
//	go test -tags conformance -count=1 ./internal/adapt/kube/conformance/
package conformance
