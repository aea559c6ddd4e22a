// A provider controller written for kube-bind, as kube-bind's users write
// them: it knows nothing of bindery. It works on the provider cluster only
// (its kubeconfig), lists the bound resource in every namespace, acts on the
// objects kube-bind's konnector marks as a consumer's
// (`kube-bind.io/cluster-namespace` and `kube-bind.io/consumer-namespace`),
// reads the Secret the consumer claimed and that kube-bind copied into the
// object's provider namespace (named by a spec field), and writes the
// object's status. It prints one JSON line per status it writes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	clusterNamespaceAnnotation  = "kube-bind.io/cluster-namespace"
	consumerNamespaceAnnotation = "kube-bind.io/consumer-namespace"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the provider's kubeconfig")
	group := flag.String("group", "", "the bound resource's group")
	version := flag.String("version", "v1", "its version")
	resource := flag.String("resource", "", "its plural")
	secretField := flag.String("secret-field", "", "the spec field naming the consumer's Secret")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	client := dynamic.NewForConfigOrDie(config)
	bound := client.Resource(schema.GroupVersionResource{Group: *group, Version: *version, Resource: *resource})
	secrets := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	ctx := context.Background()
	for {
		list, err := bound.Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "list:", err)
			time.Sleep(time.Second)
			continue
		}
		for i := range list.Items {
			reconcile(ctx, bound, secrets, &list.Items[i], *secretField)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func reconcile(ctx context.Context, bound, secrets dynamic.NamespaceableResourceInterface, object *unstructured.Unstructured, secretField string) {
	annotations := object.GetAnnotations()
	clusterNamespace, ok := annotations[clusterNamespaceAnnotation]
	if !ok {
		return // not a consumer's object
	}
	status := map[string]interface{}{
		"phase":             "WaitingForSecret",
		"clusterNamespace":  clusterNamespace,
		"consumerNamespace": annotations[consumerNamespaceAnnotation],
	}
	name, _, _ := unstructured.NestedString(object.Object, "spec", secretField)
	if name != "" {
		secret, err := secrets.Namespace(object.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			password, _, _ := unstructured.NestedString(secret.Object, "data", "password")
			status["phase"] = "Bound"
			status["secretVersion"] = secret.GetResourceVersion()
			status["passwordData"] = password
		}
	}
	current, _, _ := unstructured.NestedMap(object.Object, "status")
	if equality.Semantic.DeepEqual(current, status) {
		return
	}
	object.Object["status"] = status
	if _, err := bound.Namespace(object.GetNamespace()).UpdateStatus(ctx, object, metav1.UpdateOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "status:", err)
		return
	}
	line, _ := json.Marshal(map[string]interface{}{
		"namespace": object.GetNamespace(), "name": object.GetName(), "status": status,
	})
	fmt.Println(string(line))
}
