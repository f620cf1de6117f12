// Package kube makes sturdy a Gateway API and Ingress implementation. It
// watches GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes,
// ReferenceGrants, Services, EndpointSlices, Secrets, Namespaces and
// Ingresses through client-go informers, and translates a snapshot of
// them into more listeners, routes and pools of sturdy's own config
// (Translate, a pure function).
// That config then goes through config validation and the compile step
// exactly like a file, and the server applies it with its ordinary
// reload: the controller is a translation, never a second engine.
//
// What today's config cannot express (exact and regex paths, header,
// query and method matches, filters) is never dropped silently: the rule
// is left out and the route says so in its status (PartiallyInvalid or
// Accepted=False with reason UnsupportedValue), and an Ingress annotation
// sturdy does not understand becomes a Warning event on the Ingress.
//
// Status (conditions, listener status, Ingress load-balancer addresses,
// the GatewayClass's supported features) is written by one replica at a
// time, chosen by a Lease; every replica serves.
package kube
