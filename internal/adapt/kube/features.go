package kube

import (
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// SupportedFeatures are the Gateway API features sturdy implements, as
// the GatewayClass status publishes them (sorted, as the spec asks): each
// is a translation onto sturdy's routing (docs/routing.md) and has a test
// against a real API server (docs/kubernetes.md lists them).
func SupportedFeatures() []gwv1.SupportedFeature {
	names := []features.FeatureName{
		features.SupportGateway,
		features.SupportGatewayPort8080,
		features.SupportGRPCRoute,
		features.SupportGRPCRouteNamedRouteRule,
		features.SupportHTTPRoute,
		features.SupportHTTPRoute303RedirectStatusCode,
		features.SupportHTTPRoute307RedirectStatusCode,
		features.SupportHTTPRoute308RedirectStatusCode,
		features.SupportHTTPRouteParentRefPort,
		features.SupportHTTPRouteBackendProtocolH2C,
		features.SupportHTTPRouteBackendProtocolWebSocket,
		features.SupportHTTPRouteHostRewrite,
		features.SupportHTTPRouteMethodMatching,
		features.SupportHTTPRouteNamedRouteRule,
		features.SupportHTTPRoutePathRedirect,
		features.SupportHTTPRoutePathRewrite,
		features.SupportHTTPRoutePortRedirect,
		features.SupportHTTPRouteQueryParamMatching,
		features.SupportHTTPRouteRequestMirror,
		features.SupportHTTPRouteRequestPercentageMirror,
		features.SupportHTTPRouteRequestTimeout,
		features.SupportHTTPRouteResponseHeaderModification,
		features.SupportHTTPRouteSchemeRedirect,
		features.SupportReferenceGrant,
	}
	slices.Sort(names)
	out := make([]gwv1.SupportedFeature, len(names))
	for i, n := range names {
		out[i] = gwv1.SupportedFeature{Name: gwv1.FeatureName(n)}
	}
	return out
}
