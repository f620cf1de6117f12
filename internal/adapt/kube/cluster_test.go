package kube

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

func TestClusterServesGatewayAPI(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "smoke")
	gc, err := gwclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gc.GatewayV1().HTTPRoutes(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("HTTPRoutes are not served: %v", err)
	}
}
