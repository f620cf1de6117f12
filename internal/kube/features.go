package kube

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// SupportedFeatures are the Gateway API features sturdy implements, as
// the GatewayClass status publishes them (sorted, as the spec asks).
// Features that need issue 15's routing (header, query and method
// matches, filters, weights beyond host weights) join this list when it
// lands.
func SupportedFeatures() []gwv1.SupportedFeature {
	names := []features.FeatureName{
		features.SupportGateway,
		features.SupportGatewayPort8080,
		features.SupportHTTPRoute,
		features.SupportReferenceGrant,
	}
	out := make([]gwv1.SupportedFeature, len(names))
	for i, n := range names {
		out[i] = gwv1.SupportedFeature{Name: gwv1.FeatureName(n)}
	}
	return out
}
