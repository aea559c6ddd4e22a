// A controller-runtime (v0.22.4) controller of one bound resource across
// every namespace, as an app team writes one: for each object, it records
// spec.size in the annotation "reconciled-size", with an Update carrying the
// resourceVersion its cache holds. Each write is printed as one JSON line
// ({"namespace":…,"name":…,"size":…}); it runs until stdin closes.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func main() {
	kubeconfig := flag.String("app-kubeconfig", "", "the app cluster's kubeconfig (controller-runtime has its own --kubeconfig)")
	group := flag.String("group", "", "API group")
	version := flag.String("version", "", "API version")
	kind := flag.String("kind", "", "kind")
	flag.Parse()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	gvk := schema.GroupVersionKind{Group: *group, Version: *version, Kind: *kind}
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	watched := &unstructured.Unstructured{}
	watched.SetGroupVersionKind(gvk)
	reconciler := reconcile.Func(func(ctx context.Context, request reconcile.Request) (reconcile.Result, error) {
		object := &unstructured.Unstructured{}
		object.SetGroupVersionKind(gvk)
		if err := manager.GetClient().Get(ctx, request.NamespacedName, object); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		size, _, _ := unstructured.NestedFieldNoCopy(object.Object, "spec", "size")
		text := fmt.Sprint(size)
		annotations := object.GetAnnotations()
		if annotations["reconciled-size"] == text {
			return reconcile.Result{}, nil
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations["reconciled-size"] = text
		object.SetAnnotations(annotations)
		if err := manager.GetClient().Update(ctx, object); err != nil {
			fmt.Fprintf(os.Stderr, "updating %s: %v\n", request.NamespacedName, err)
			return reconcile.Result{}, err
		}
		out.Lock()
		defer out.Unlock()
		_ = out.enc.Encode(map[string]string{"namespace": request.Namespace, "name": request.Name, "size": text})
		return reconcile.Result{}, nil
	})
	if err := ctrl.NewControllerManagedBy(manager).For(watched).Named("gadgets").Complete(reconciler); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		input := bufio.NewScanner(os.Stdin)
		for input.Scan() {
		}
		cancel()
	}()
	if err := manager.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}
